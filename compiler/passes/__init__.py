"""Compiler passes, one module each, in pipeline order:

fusion (graph -> layers) -> tiling (layer -> tile plan) -> memplan (external addresses) ->
lowering (tile plan -> instructions with their footprints) -> schedule (order + wait masks).
"""
