"""``SDS_SERVER=temporary``: Prefect's temporary server on a new ``PREFECT_HOME`` starts from a
copy of the database template (as a home's server does) instead of migrating an empty database;
a database that is there, or one the user chose, is left alone."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from sds_release.flows.local import launch
from sds_release.flows.local.template import DB_NAME, TEMPLATE_ENV, template_dir


@pytest.fixture
def template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A template folder of this installation holding a stand-in database; its path."""
    monkeypatch.setenv(TEMPLATE_ENV, str(tmp_path / "cache"))
    for var in ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
        monkeypatch.delenv(var, raising=False)
    folder = template_dir()
    assert folder is not None
    folder.mkdir(parents=True)
    (folder / DB_NAME).write_bytes(b"migrated database")
    return folder


def test_a_new_prefect_home_gets_a_private_copy(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / "prefect"
    monkeypatch.setenv("PREFECT_HOME", str(home))
    launch._seed_temporary_database()
    assert (home / DB_NAME).read_bytes() == b"migrated database"
    assert stat.S_IMODE((home / DB_NAME).stat().st_mode) == 0o600


def test_a_database_already_there_is_kept(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "prefect-home"
    home.mkdir()
    (home / DB_NAME).write_bytes(b"the runs of earlier releases")
    monkeypatch.setenv("PREFECT_HOME", str(home))
    launch._seed_temporary_database()
    assert (home / DB_NAME).read_bytes() == b"the runs of earlier releases"


def test_a_database_the_user_chose_gets_no_copy(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "prefect-home"
    monkeypatch.setenv("PREFECT_HOME", str(home))
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://u@h/db")
    launch._seed_temporary_database()
    assert not (home / DB_NAME).exists()
