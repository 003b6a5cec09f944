"""The warm runner refuses a call of another hand-off protocol (a runner started before an
upgrade must not run a call it would misread: the client then runs the release itself)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from sds_release.flows.local.handoff import PROTOCOL, import_time_env, runner_identity
from sds_release.store.workspace.source_tree import project_root

runner = pytest.importorskip("sds_release.flows.local.runner")


def test_a_call_of_another_protocol_is_refused(tmp_path: Path) -> None:
    """A call naming the bare source tree (protocol 1) or another version is refused for it;
    this protocol's identity is not refused for its project."""
    listener, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        warm = runner.Runner(tmp_path, "http://127.0.0.1:1/api", listener)
        env = import_time_env(os.environ)
        for project in (project_root(), f"{project_root()} (hand-off protocol {PROTOCOL + 1})"):
            why = warm.refusal({"project": project, "env": env})
            assert why is not None and "hand-off protocol" in why and project in why
        why = warm.refusal({"project": runner_identity(), "env": env})
        assert why is None or "hand-off protocol" not in why  # only the thread rule may refuse
    finally:
        listener.close()
        other.close()
