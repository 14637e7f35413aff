"""TOSA MATMUL on the MAC array (``kind.py``)."""
