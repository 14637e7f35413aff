# tosa-npu: the commands the README promises.
#   make setup                 create .venv and install everything (pip only)
#   make test                  the whole test suite (what CI runs)
#   make sim MODEL=alexnet     run a model end to end on the RTL, bit-exact against the reference
#                              (also resnet50, mobilenetv2: built on first use by tools/make_*.py)
#   make bench                 benchmarks (speed and cycle figures)
#   make synth CONFIG=small TARGET=ecp5   synthesis report per unit (YoWASP Yosys; build/synth/)
#   make bitstream BOARD=icebreaker DESIGN=bridge   FPGA bitstream (YoWASP; build/board/<board>/),
#                              BOARD=ulx3s|icebreaker, DESIGN=npu|bridge, BOARD_CONFIG=<name>,
#                              FREQ=<MHz>, MEM_KIB=<board memory>,
#                              NEXTPNR_OPTS="--placer static --router router2" (nextpnr options in
#                              place of the board's), SEEDS=1,4,7 (the first is used; with router2,
#                              the others are tried while it stalls)
#   make docs                  regenerate generated documentation and headers
#   make conformance-full      the official generator's whole TOSA 1.0 PRO-INT listing (both seeds,
#                              ~20,000 tests a seed) into build/conformance/full, one resumable
#                              chunk per operator and seed (CONF_OPS=REGEX for some operators),
#                              then run on ref and isa: report-{ref,isa}.{txt,json} beside it
#   make fuzz                  fuzz campaigns over every input kind (FUZZ_COUNT inputs each);
#                              findings are added to fuzz/corpus/, which `make test` replays

VENV    ?= .venv
PYTHON  ?= $(VENV)/bin/python
MODEL   ?= slice
BACKEND ?= rtl
# Test processes (pytest-xdist): the 2 cores of a typical machine.
JOBS    ?= 2
FUZZ_COUNT ?= 10000
FUZZ_SEED ?= 1

.PHONY: setup test test-fast sim bench synth bitstream docs fuzz clean conformance-full

CONFIG  ?= small
TARGET  ?= ecp5

setup:
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --upgrade pip
	$(PYTHON) -m pip install -e '.[dev]'

# Tests build their Verilator models without the profile-guided pass (hw/harness/simulation.py):
# the same Verilog, compiled in half the time; the profile only makes long simulations faster.
test:
	NPU_RTL_PGO=0 $(PYTHON) -m pytest -n $(JOBS)

test-fast:
	$(PYTHON) -m pytest -n $(JOBS) -m "not rtl"

sim:
	$(PYTHON) -m npu.demo $(MODEL) --backend $(BACKEND)

bench:
	$(PYTHON) -m bench

fuzz:
	$(PYTHON) -m fuzz --count $(FUZZ_COUNT) --seed $(FUZZ_SEED)

# Not part of `make test`: generating the whole listing takes hours on one core (README).
CONF_FULL ?= build/conformance/full
CONF_OPS  ?=
CONF_JOBS ?= 1

conformance-full:
	$(PYTHON) tools/make_conformance_corpus.py --full --out $(CONF_FULL) --jobs $(CONF_JOBS) $(if $(CONF_OPS),--ops '$(CONF_OPS)')
	status=0; for b in ref isa; do \
	  $(PYTHON) -m npu conformance $(CONF_FULL) --backend $$b --jobs $(CONF_JOBS) --verbose \
	    --json $(CONF_FULL)/report-$$b.json > $(CONF_FULL)/report-$$b.txt || status=1; \
	  tail -n 1 $(CONF_FULL)/report-$$b.txt | sed "s/^/$$b: /"; \
	done; exit $$status

synth:
	$(PYTHON) -m hw.synth --config $(CONFIG) --target $(TARGET)

BOARD   ?= ulx3s
DESIGN  ?= npu
BOARD_CONFIG ?=

bitstream:
	$(PYTHON) -m hw.board build --board $(BOARD) --design $(DESIGN) $(if $(BOARD_CONFIG),--config $(BOARD_CONFIG)) \
		$(if $(FREQ),--freq $(FREQ)) $(if $(MEM_KIB),--mem-kib $(MEM_KIB)) \
		$(if $(NEXTPNR_OPTS),--nextpnr-opts "$(NEXTPNR_OPTS)") $(if $(SEEDS),--seeds $(SEEDS))

docs:
	$(PYTHON) -m isa.generate
	$(PYTHON) -m hw.harness.csr_header
	$(PYTHON) tools/make_supported_ops.py

clean:
	rm -rf build sim_build .pytest_cache
