"""DEPTHWISE_CONV2D: the unit each layer runs on (choice.py), the vector-unit form (vector.py)."""
