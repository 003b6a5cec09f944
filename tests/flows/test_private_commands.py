"""Every ``sds`` command writes privately, not only ``sds release``: with the caller's umask 022,
signing a release, its series, the audit page, a split and the cancel of a release leave
nothing under the home open to group or others (before, ``sds sign`` wrote ``manifest.sig`` and
``signing-key.pub`` 0644, ``sds series`` its whole folder 0755/0644, ``sds cancel`` the
release's manifest 0644)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import run_cli


@pytest.fixture
def umask_022() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _open_to_others(root: Path) -> dict[str, str]:
    """What `find root -perm /077` lists, the root included, by path relative to it."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for path in [Path(folder)] * (Path(folder) == root) + [
            Path(folder, name) for name in (*dirs, *files)
        ]:
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode & 0o077:
                found[path.relative_to(root).as_posix()] = oct(mode)
    return found


def test_no_command_leaves_a_file_open_to_others(
    tiny_csv: Path,
    tiny_config: Path,
    example_csv: Path,
    home: Path,
    prefect_server: str,
    umask_022: None,
) -> None:
    given = ["--config", str(tiny_config), "--home", str(home), "--seed", "1", "--quiet"]
    code, _, err = run_cli("release", str(tiny_csv), *given, "--release-id", "r1")
    assert code == 0, err
    assert _open_to_others(home) == {}
    for command in (
        ["sign", "r1", "--home", str(home)],
        ["series", "tiny", "--home", str(home)],
        ["audit", "--report", "--home", str(home)],
        ["split", str(example_csv), "--out-dir", str(home / "split")],
    ):
        code, _, err = run_cli(*command)
        assert code == 0, (command, err)
        assert _open_to_others(home) == {}, command
    too_small = ["--record-limit", "30", "--epsilon", "0.1", "--release-id", "r2"]
    assert run_cli("release", str(tiny_csv), *given, *too_small)[0] == 1
    assert run_cli("cancel", "r2", "--home", str(home))[0] == 0
    assert _open_to_others(home) == {}
    assert (home / "series").is_dir() and (home / "split").is_dir()


def test_a_home_made_by_hand_is_made_private_by_the_first_command(
    tiny_csv: Path, tiny_config: Path, tmp_path: Path, prefect_server: str, umask_022: None
) -> None:
    """A home the user made with mkdir (0755 under the umask 022) and released into without a
    lasting server (the tests' SDS_SERVER=temporary, as a custodian may set it) ends 0700 like
    everything in it, and the release says so once; the next command has nothing to say."""
    home = tmp_path / "made-by-hand"
    home.mkdir()
    assert _open_to_others(home) == {".": "0o755"}
    given = ["--config", str(tiny_config), "--home", str(home), "--seed", "1", "--quiet"]
    code, _, err = run_cli("release", str(tiny_csv), *given, "--release-id", "r1")
    assert code == 0, err
    assert _open_to_others(home) == {}
    said = [line for line in err.splitlines() if "private to their owner" in line]
    assert len(said) == 1 and f"the home {home} (was 755, now 700)" in said[0], err
    code, _, err = run_cli("budget", "show", "--home", str(home))
    assert code == 0 and "private to their owner" not in err


def test_a_home_an_earlier_version_left_open_is_made_private_whole(
    tmp_path: Path, umask_022: None
) -> None:
    """A home made before homes were private (0755, its releases, private workspace and ledger
    0644/0755 under the umask 022): the first command makes the home and all of its own folders
    owner-only and says so in one line; a file of the user's own beside them is left alone."""
    home = tmp_path / "old-home"
    for folder in ("releases/ds/r1", "private/r1", "prefect"):
        (home / folder).mkdir(parents=True)
    for name in ("releases/ds/r1/manifest.json", "private/r1/params.json"):
        (home / name).write_text("{}")
    (home / "ledger.sqlite").write_bytes(b"")  # an empty SQLite database
    (home / "notes.txt").write_text("mine")
    code, _, err = run_cli("budget", "show", "--home", str(home))
    assert code == 0, err
    assert _open_to_others(home) == {"notes.txt": "0o644"}
    said = [line for line in err.splitlines() if "private to their owner" in line]
    assert len(said) == 1 and f"the home {home} (was 755, now 700)" in said[0], err
    assert "and 1 files and folders of its Prefect server" in said[0], err
    assert "and 8 of its releases, private workspace and ledger" in said[0], err
