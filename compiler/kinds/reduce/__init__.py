"""Reductions on VPOOL (``kind.py``)."""
