"""Operators built from other kinds' layers (``kind.py``)."""
