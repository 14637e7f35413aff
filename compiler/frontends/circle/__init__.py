"""Circle / TFLite flatbuffers -> TOSA (``load.py`` ``load_circle``)."""
