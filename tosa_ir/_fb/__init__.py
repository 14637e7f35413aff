"""Internals of the .tosa flatbuffer serialisation: the schema description and tensor data codecs.

Use :mod:`tosa_ir.tosa_fb` (``read_tosa``/``write_tosa``); nothing here is a public interface.
"""
