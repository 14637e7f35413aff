"""TOSA -> TOSA: validation (ERROR_IFs), COND_IF preparation, trip counts, quantization."""
