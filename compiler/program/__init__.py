"""Program-level stages: memory planning, scheduling, loop compression, the program image."""
