"""Paths computed from a module's own file name the project, after the namespace move too.

The move of flows/, tasks/ and release_store/ under sds_release/ left ``parents[2]`` in four
places, one level short: the anonymeter environment was looked for in
``sds_release/.venv-anonymeter`` (CI's privacy-risk tests failed), and the supervisor put
``sds_release/`` itself on the server's PYTHONPATH (``flows`` importable twice, under two names).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sds_release.flows.local import server, supervisor
from sds_release.store.compare import risk
from sds_release.store.workspace.source_tree import project_root

PROJECT = Path(__file__).resolve().parents[2]


def test_the_project_root_holds_pyproject_and_the_package() -> None:
    root = Path(project_root())
    assert root == PROJECT
    assert (root / "pyproject.toml").is_file()
    assert (root / "sds_release" / "__init__.py").is_file()


def test_the_server_gets_the_project_on_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert server.supervisor_env()["PYTHONPATH"].split(os.pathsep) == [str(PROJECT)]
    command = supervisor._server_command(4200)
    assert command[command.index("--app-dir") + 1] == str(PROJECT)


def test_anonymeter_is_looked_for_in_the_project(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(risk.ANONYMETER_PYTHON_ENV, raising=False)
    expected = PROJECT / ".venv-anonymeter" / "bin" / "python"
    if expected.exists():
        assert risk.anonymeter_python() == expected
    else:
        with pytest.raises(Exception, match=str(expected)):
            risk.anonymeter_python()
