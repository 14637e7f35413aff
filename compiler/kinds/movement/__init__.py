"""Data movement: brick copies and rows moves (``kind.py``)."""
