"""Helpers for the tests of the `npu` command line (not a test module).

* :func:`npu`: run ``python -m npu ...`` in a subprocess, as a user would.
* :func:`assert_user_error`: the run failed with one clear line on stderr, no traceback.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def npu(*args, cwd=ROOT, timeout=300) -> tuple[int, str, str]:
    """``python -m npu *args``: (exit code, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "npu", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def assert_user_error(result, code, *words, prefix: str = ""):
    """``result`` (from :func:`npu`) exited with ``code`` and one stderr line (starting with
    ``prefix``) naming every one of ``words``."""
    rc, out, err = result
    assert rc == code, (rc, out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(prefix), lines[0]
    for w in words:
        assert w in lines[0], lines[0]
