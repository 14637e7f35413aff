# tosa-npu: the commands the README promises.
#   make setup                 create .venv and install everything (pip only)
#   make test                  the whole test suite (what CI runs)
#   make sim MODEL=alexnet     run a model end to end on the RTL, bit-exact against the reference
#   make bench                 benchmarks (speed and cycle figures)
#   make synth CONFIG=small TARGET=ecp5   synthesis report per unit (YoWASP Yosys; build/synth/)
#   make docs                  regenerate generated documentation and headers

VENV    ?= .venv
PYTHON  ?= $(VENV)/bin/python
MODEL   ?= slice
BACKEND ?= rtl

.PHONY: setup test test-fast sim bench synth docs clean

CONFIG  ?= small
TARGET  ?= ecp5

setup:
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --upgrade pip
	$(PYTHON) -m pip install -e '.[dev]'

test:
	$(PYTHON) -m pytest

test-fast:
	$(PYTHON) -m pytest -m "not rtl"

sim:
	$(PYTHON) -m npu.demo $(MODEL) --backend $(BACKEND)

bench:
	$(PYTHON) -m bench

synth:
	$(PYTHON) -m hw.synth --config $(CONFIG) --target $(TARGET)

docs:
	$(PYTHON) -m isa.generate
	$(PYTHON) -m hw.csr_header

clean:
	rm -rf build sim_build .pytest_cache
