"""Returning the allocators' free memory at the end of a stage (sds_release/store/run/memory.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from sds_release.store.run.memory import return_free_memory

MIB = 2**20

# In a fresh interpreter (the test process's heap layout, after hundreds of tests, is not
# predictable): 200 MB freed in 100 kB heap blocks (below glibc's mmap threshold, so they
# stay in the heap behind a live block), then a stage ends; prints RSS before and after.
PROBE = textwrap.dedent(
    """
    from pathlib import Path
    import numpy as np
    from sds_release.store.run.stages import Timeline

    def rss():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

    blocks = [np.ones(100_000 // 8) for _ in range(2_000)]
    pin = np.ones(100_000 // 8)  # a live block above the freed ones: no plain heap shrink
    del blocks
    before = rss()
    with Timeline().run("ingest"):
        pass
    print(before, rss(), int(pin.sum()))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim, /proc")
def test_freed_heap_pages_go_back_after_a_stage() -> None:
    """The freed heap pages are returned to the system when a stage ends."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    before, after, pinned = (int(x) for x in out)
    assert pinned == 100_000 // 8
    assert before - after > 100 * MIB, (before / MIB, after / MIB)
    return_free_memory()  # in this process too: nothing to check, no error
