"""DIM and the variable operators (``kind.py``)."""
