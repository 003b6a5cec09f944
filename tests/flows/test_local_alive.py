"""``flows.local.server.alive``: an ended child is not alive (its zombie is reaped)."""

from __future__ import annotations

import os
import subprocess
import time

from flows.local.server import alive


def test_an_ended_child_is_not_alive_a_running_one_is() -> None:
    """A supervisor that exited is a zombie of the process that started it until reaped; the
    client's wait for its server must see it ended (before: it waited the whole 300 s and then
    said the server 'did not answer within 300 s')."""
    ended = subprocess.Popen(["sleep", "0.1"])
    running = subprocess.Popen(["sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while alive(ended.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(ended.pid)
        assert alive(running.pid)
        assert alive(os.getpid())
    finally:
        running.kill()
        running.wait()
