"""TOSA -> TOSA, before the dataflow pass: validation (ERROR_IFs), constant folding (constant_fold),
COND_IF preparation, trip counts, quantization."""
