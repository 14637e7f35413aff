"""Elementwise operators on the vector unit (``kind.py``)."""
