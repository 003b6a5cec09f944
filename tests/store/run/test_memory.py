"""Returning the allocators' free memory at the end of a stage (release_store/run/memory.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from release_store.run.memory import return_free_memory
from release_store.run.stages import Timeline

MIB = 2**20


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim, /proc")
def test_freed_heap_pages_go_back_after_a_stage() -> None:
    """200 MB freed in 100 kB heap blocks (below glibc's mmap threshold, so they stay in the
    heap behind a live block) are returned to the system when a stage ends."""
    blocks = [np.ones(100_000 // 8) for _ in range(2_000)]
    pin = np.ones(100_000 // 8)  # a live block above the freed ones: no plain heap shrink
    del blocks
    before = _rss()
    with Timeline().run("ingest"):
        pass
    after = _rss()
    assert before - after > 100 * MIB, (before / MIB, after / MIB)
    assert pin.sum() == pin.size
    return_free_memory()  # nothing left to return: a no-op, no error
