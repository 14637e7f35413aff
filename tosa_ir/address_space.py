"""Capping a process's address space: the guard for work whose memory cannot be bounded up front.

Declared sizes are checked before allocating (tosa_ir/limits.py), but some work can grow
without a declaration to check: the Khronos NNEF parser expanding fragments
(compiler/frontends/nnef/parse.py) or a conformance test driving a backend
(npu/guarded_workers.py).  Such work runs with the address-space limit (``RLIMIT_AS``) at the
process's present size plus a budget, so an allocation past it raises ``MemoryError`` (or
fails in C) inside the work instead of the kernel's out-of-memory killer choosing a process.
Address space, not resident memory, is what the kernel can cap per process.  A lower limit
already in force is kept; where the platform has no ``RLIMIT_AS`` nothing is capped.

This module imports nothing of ours, so every package may use it.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

__all__ = ["address_space_cap", "vm_size"]


def vm_size() -> int:
    """This process's address space in bytes (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@contextmanager
def address_space_cap(budget: int):
    """Limit this process's address space to its present size plus ``budget`` bytes (0: no
    limit) for the duration of the block; the previous soft limit is restored after."""
    try:
        import resource
    except ImportError:             # no RLIMIT_AS here: run uncapped
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = vm_size() + budget
    applied = False
    if budget > 0 and (hard == resource.RLIM_INFINITY or limit < hard) \
            and (soft == resource.RLIM_INFINITY or limit < soft):
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
            applied = True
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        if applied:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
