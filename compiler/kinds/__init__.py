"""One package per layer kind (selection, planning, lowering, ``kind.py``); ``registry.py``
lists them.  See compiler/README.md, "Adding a layer kind"."""
