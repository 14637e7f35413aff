"""MAX_POOL2D and AVG_POOL2D (``kind.py``)."""
