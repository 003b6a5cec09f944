"""`sds --version` and the shell completion typer offers."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]


def _sds(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sds_release.flows.cli", *args],
        cwd=PROJECT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_version_is_the_packaged_one() -> None:
    """--version prints pyproject's version (the one place it lives) and exits 0."""
    expected = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]["version"]
    done = _sds("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"sds-release {expected}"


def test_completion_script_for_bash() -> None:
    """--show-completion, run from a bash, prints a bash completion function for `sds`.

    typer detects the shell from the parent processes (shellingham), not from $SHELL: the
    command runs as a child of a real bash (the `; exit` keeps bash from exec-ing it), so the
    test does not depend on what started pytest (make runs recipes through /bin/sh).
    """
    done = subprocess.run(
        ["bash", "-c", '"$0" -m sds_release.flows.cli --show-completion; exit $?', sys.executable],
        cwd=PROJECT,
        env={**os.environ, "SHELL": "/bin/bash"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "_sds_completion" in done.stdout and "complete" in done.stdout


def test_completion_completes_commands() -> None:
    """The completion protocol (what the installed script calls) offers the command names."""
    done = _sds(_SDS_COMPLETE="complete_bash", COMP_WORDS="sds bud", COMP_CWORD="1")
    assert done.returncode == 0, done.stderr
    assert "budget" in done.stdout.split()
