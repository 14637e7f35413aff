"""Convolutions with wide outputs on the MAC array (``kind.py``)."""
