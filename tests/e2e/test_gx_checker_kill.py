"""The GX checker process never outlives the release that started it (SIGKILLed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import PROJECT


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.is_file() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")
def test_checker_dies_with_a_killed_release() -> None:
    """SIGKILL the process that started a checker: its output pipe closes at once (the checker
    does not hold it) and the checker exits by itself."""
    code = (
        "import time; from sds_release.store.inputs import gx_suite; gx_suite.start_checker(); "
        "print('started', flush=True); time.sleep(600)"
    )
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
    end = time.monotonic() + 60
    checkers: list[int] = []
    while not checkers and time.monotonic() < end:
        # forked (the parent runs one thread) or spawned; not multiprocessing's resource tracker
        checkers = [p for p in _children(proc.pid) if b"resource_tracker" not in _cmdline(p)]
        time.sleep(0.2)
    assert checkers, "no checker process found"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.stdout.read() == b""  # EOF: no one else holds the release's stdout
    end = time.monotonic() + 60
    while any(_alive(p) for p in checkers) and time.monotonic() < end:
        time.sleep(0.2)
    assert not any(_alive(p) for p in checkers)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
