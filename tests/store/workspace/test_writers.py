"""Who can change a config or an input (sds_release.store.workspace.writers, issue #37): every
folder on the path, as given and as resolved, is this user's or root's and writable by no one else;
a sticky shared folder only holds entries of theirs. Checked where configs and inputs are read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config import load_config
from sds_release.store.inputs.paths import check_input_path
from sds_release.store.workspace.writers import check_path_writers
from tests.helpers import TINY_CONFIG

ROOT = os.geteuid() == 0


@pytest.fixture
def safe(tmp_path: Path) -> Path:
    """A folder of this user, 0700."""
    path = tmp_path / "safe"
    path.mkdir(mode=0o700)
    return path


@pytest.mark.parametrize(
    ("mode", "who", "fix"),
    [
        (0o775, "its group", "g-w"),
        (0o757, "every user", "o-w"),
        (0o777, "its group and every user", "go-w"),
    ],
)
def test_a_folder_others_can_write_is_refused_naming_it_and_the_fix(
    safe: Path, mode: int, who: str, fix: str
) -> None:
    """A config two folders below a folder its group or everyone can write: refused, naming
    that folder, who can write it and the chmod that fixes it."""
    open_folder = safe / "shared"
    (open_folder / "configs").mkdir(parents=True)
    config = open_folder / "configs" / "tiny.toml"
    config.write_text(TINY_CONFIG)
    open_folder.chmod(mode)
    with pytest.raises(
        SdsInputError,
        match=rf"the folder {open_folder} on the path of the config {config} is writable by "
        rf"{who} \(mode {mode:o}\).*run `chmod {fix} {open_folder}`",
    ):
        load_config(config)
    open_folder.chmod(0o755)
    assert load_config(config)["dataset"] == "tiny"


def test_a_symlink_is_checked_where_it_points(safe: Path, tmp_path: Path) -> None:
    """A config reached through a symlink in a safe folder: the folders of the file it points
    to are checked too (a writable one is refused), and it is read from there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o777)
    elsewhere.chmod(0o777)
    target = elsewhere / "real.toml"
    target.write_text(TINY_CONFIG)
    link = safe / "tiny.toml"
    link.symlink_to(target)
    with pytest.raises(SdsInputError, match=rf"the folder {elsewhere} on the path of the config"):
        load_config(link)
    elsewhere.chmod(0o755)
    assert check_path_writers([link], "the config") == [target]


def test_an_input_and_a_parquet_dataset_are_checked(safe: Path) -> None:
    """An input file in a writable folder, and a Parquet dataset whose own folder is
    writable (its part files could be swapped): refused naming the folder."""
    data = safe / "data"
    data.mkdir()
    (data / "part-0.parquet").write_bytes(b"PAR1")
    (safe / "in.csv").write_text("a\n1\n")
    data.chmod(0o770)
    with pytest.raises(SdsInputError, match=rf"the folder {data} on the path of the input"):
        check_input_path(data)
    with pytest.raises(SdsInputError, match=rf"the folder {data} on the path of the input"):
        check_input_path(data / "*.parquet")
    safe.chmod(0o777)
    with pytest.raises(SdsInputError, match=rf"the folder {safe} on the path of the input"):
        check_input_path(safe / "in.csv")


def test_a_sticky_shared_folder_is_fine_for_entries_of_this_user(safe: Path) -> None:
    """A world-writable sticky folder (as /tmp) lets others add entries but not replace this
    user's: a config below an entry of this user's passes."""
    shared = safe / "tmp"
    (shared / "mine").mkdir(parents=True)
    config = shared / "mine" / "tiny.toml"
    config.write_text(TINY_CONFIG)
    shared.chmod(0o1777)
    assert check_path_writers([config], "the config") == [config]


@pytest.mark.skipif(not ROOT, reason="giving a folder to another user needs root")
def test_folders_and_sticky_entries_of_another_user_are_refused(safe: Path) -> None:
    """A folder on the path owned by another user, or this user's config under another user's
    entry of a sticky folder: refused, naming the uid."""
    shared = safe / "tmp"
    (shared / "theirs").mkdir(parents=True)
    config = shared / "theirs" / "tiny.toml"
    config.write_text(TINY_CONFIG)
    shared.chmod(0o1777)
    os.chown(shared / "theirs", 4242, -1)
    with pytest.raises(SdsInputError, match=r"theirs on the path of the config .* \(uid 4242\)"):
        check_path_writers([config], "the config")
    shared.chmod(0o755)
    with pytest.raises(SdsInputError, match=r"the folder .*theirs .* belongs to another user"):
        check_path_writers([config], "the config")


def test_missing_folders_are_left_to_the_reader(tmp_path: Path) -> None:
    """A path under folders that do not exist passes here (its reader refuses it)."""
    missing = tmp_path / "no" / "such" / "in.csv"
    assert check_path_writers([missing], "the input") == [missing]
