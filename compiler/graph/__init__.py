"""Graph-level rewrites: TOSA graph -> TOSA graph, before the dataflow pass (constant_fold)."""
