"""The ISA simulator: ``sim.py`` runs programs; ``units.py`` (DMA, MXU), ``vpu.py``, ``table.py``
execute instructions (one table: ``executors.py``); ``hazards.py``, ``loops.py``, ``branch.py``.
The cycle model beside it is sim/npu_timing.py."""
