"""TOSA flatbuffers (``load.py`` ``load_tosa``)."""
