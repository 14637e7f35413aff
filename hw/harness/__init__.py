"""The tooling around the RTL: the Verilator build and program runner (``simulation.py``), its
environment (``verilator_env.py``), the testbench (``tb/``) and the firmware headers
(``csr_header.py``).  The RTL (hw/*.py) never imports it."""
