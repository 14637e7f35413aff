"""npu/guarded_workers.py: a task that dies or exceeds its memory budget is that task's verdict."""
from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from npu.guarded_workers import WorkerDied, default_budget, map_guarded
from tosa_ir.address_space import address_space_cap

GIB = 1 << 30


def _square_or_die(x: int) -> int:
    if x == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


def _allocate(n: int) -> str:
    try:
        np.ones(n, dtype=np.uint8)
    except MemoryError:
        return "MemoryError"
    return "ok"


def test_dead_worker_is_one_task_verdict():
    got = dict(map_guarded(_square_or_die, list(range(7)), jobs=2))
    assert sorted(got) == list(range(7))
    assert got[3] == WorkerDied(-signal.SIGKILL)
    assert {i: v for i, v in got.items() if i != 3} == {i: i * i for i in range(7) if i != 3}
    assert "killed (SIGKILL" in got[3].describe() and "out-of-memory" in got[3].describe()


def test_exit_status_described():
    assert "status 1" in WorkerDied(1).describe()
    assert "SIGSEGV" in WorkerDied(-signal.SIGSEGV).describe()


@pytest.mark.parametrize("jobs", [1, 2])
def test_budget_turns_a_blow_up_into_memory_error(jobs):
    # 3 GiB would be granted without the limit (the machine overcommits far less than that);
    # with a 512 MiB budget the allocation fails inside the task.
    got = dict(map_guarded(_allocate, [3 * GIB, 1 << 20], jobs=jobs, budget=GIB // 2))
    assert got == {0: "MemoryError", 1: "ok"}


def test_budget_is_lifted_after_the_block():
    with address_space_cap(GIB // 2):
        with pytest.raises(MemoryError):
            np.empty(3 * GIB, dtype=np.uint8)
    np.empty(3 * GIB, dtype=np.uint8)       # address space only: nothing is touched


def test_default_budget_shares_memory():
    assert default_budget(4) * 4 <= default_budget(1) + 4
    assert default_budget(1000) >= GIB
