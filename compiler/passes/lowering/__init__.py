"""Lowering: layers with their tile plans -> instructions (as compiler.ops.Op), one module
per layer kind, plus the DMA helpers they share."""
