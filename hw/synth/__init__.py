"""Synthesis of the NPU with YoWASP Yosys: resource reports per unit, mapping checks.

``python -m hw.synth --config NAME --target ecp5|ice40`` (hw/synth/__main__.py); the flow is
in hw/synth/flow.py, the per-unit table in hw/synth/report.py.  Needs the ``fpga`` extra
(``pip install 'tosa-npu[fpga]'``).
"""
