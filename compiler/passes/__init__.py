"""Compiler passes, one module each, in pipeline order:

dataflow (graph -> layers, views, bindings; conv chains via fusion, data-movement operator
parameters via movement) -> tiling (conv layer -> tile plan) -> memplan (external addresses)
-> lowering (plans and copies -> instructions with their footprints) -> schedule (order +
wait masks).
"""
