"""``sds_release.flows.local.server.alive``: an ended child is not alive (its zombie is reaped)."""

from __future__ import annotations

import os
import subprocess
import time

from sds_release.flows.local.server import alive


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


def test_a_live_claim_on_the_preferred_port_sends_other_starts_elsewhere(
    tmp_path: object, monkeypatch: object
) -> None:
    """Two homes starting at once must not both pick port 4200 (the second server failed to
    bind after Prefect's start-up): a live process's recent claim sends others to any port."""
    import json
    import time
    from pathlib import Path

    import pytest

    from sds_release.flows.local import server

    assert isinstance(monkeypatch, pytest.MonkeyPatch) and isinstance(tmp_path, Path)
    claim = tmp_path / "sds-port.claim"
    monkeypatch.setattr(server, "PORT_CLAIM", claim)
    other = subprocess.Popen(["sleep", "30"])
    try:
        claim.write_text(json.dumps({"pid": other.pid, "at": time.time()}))
        assert server._claimed()
        assert server._free_port() != server.PREFERRED_PORT
        claim.write_text(json.dumps({"pid": other.pid, "at": time.time() - 2 * server.CLAIM_S}))
        assert not server._claimed()  # an old claim lapses
    finally:
        other.kill()
        other.wait()
    assert not server._claimed()  # so does a dead claimant's
