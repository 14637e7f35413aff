"""Shared compiler types below every kind: layers, views, ops, DMA windows, the cost model,
the dataflow data and ``Walk`` interface, the ``Kind`` interface, the ``Plan`` base, operator
errors and parameter access.  Imports nothing else of compiler/."""
