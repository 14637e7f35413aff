"""Convolution on the MAC array (``kind.py``)."""
