"""NNEF (graph.nnef + .dat tensors, folder or tar) -> TOSA (``load.py`` ``load_nnef``)."""
