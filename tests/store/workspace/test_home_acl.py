"""A home made inside a folder with a default POSIX ACL (``setfacl -d``, common on shared project
folders): the ACL would decide the modes of everything created under the home instead of the
umask (release files 0664, folders 0775); the home drops it, so they stay 0600 and 0700."""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path

import pytest

from sds_release.store.workspace.home import (
    DEFAULT_ACL_XATTR,
    private_umask,
    resolve_home,
)

_UNDEFINED_ID = 0xFFFFFFFF
_USER_OBJ, _GROUP_OBJ, _OTHER = 0x01, 0x04, 0x20


def _open_default_acl() -> bytes:
    """``setfacl -d -m u::rwx,g::rwx,o::rx`` as Linux stores it (version 2, then entries)."""
    entries = ((_USER_OBJ, 7), (_GROUP_OBJ, 7), (_OTHER, 5))
    return struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, perm, _UNDEFINED_ID) for tag, perm in entries
    )


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A folder with an open default ACL (skips where the file system has no ACLs)."""
    folder = tmp_path / "shared"
    folder.mkdir()
    try:
        os.setxattr(folder, DEFAULT_ACL_XATTR, _open_default_acl())
    except (AttributeError, OSError) as e:
        pytest.skip(f"no POSIX ACLs here: {e}")
    with private_umask():  # the control: the ACL overrides the umask
        (folder / "probe").mkdir()
    if stat.S_IMODE((folder / "probe").stat().st_mode) & 0o077 == 0:
        pytest.skip("the default ACL does not override the umask on this file system")
    return folder


def test_what_a_home_made_in_it_holds_stays_private(shared: Path) -> None:
    home = resolve_home(shared / "home")
    with private_umask():
        (home / "releases" / "ds").mkdir(parents=True)
        (home / "releases" / "ds" / "manifest.json").write_text("{}")
    open_to_others = [p for p in (home, *home.rglob("*")) if p.stat().st_mode & 0o077]
    assert open_to_others == []


def test_an_existing_home_loses_its_default_acl(shared: Path) -> None:
    (shared / "home").mkdir()  # inherited the default ACL
    home = resolve_home(shared / "home")
    with pytest.raises(OSError):
        os.getxattr(home, DEFAULT_ACL_XATTR)


def test_a_home_made_with_the_acl_kept_loses_it_in_every_folder(shared: Path) -> None:
    """A home made in the shared folder by a version that kept the default ACL: its folders
    inherited it and its files came out open to the group. Opened now, every folder of the home
    loses the ACL (a new release in one is private) and the old files become their owner's only;
    a file of the user's own beside them is left as it was."""
    old = shared / "home" / "releases" / "ds" / "r1"
    with private_umask():
        old.mkdir(parents=True)  # each inherits the default ACL
        (old / "manifest.json").write_text("{}")
        (shared / "home" / "ledger.sqlite").write_text("")
        (shared / "home" / "notes.txt").write_text("")  # not the home's: left alone
    assert (old / "manifest.json").stat().st_mode & 0o077  # the control: 0664 under the ACL
    home = resolve_home(shared / "home")
    assert (home / "notes.txt").stat().st_mode & 0o077
    (home / "notes.txt").unlink()
    for folder in (home / "releases", home / "releases" / "ds", old):
        with pytest.raises(OSError):
            os.getxattr(folder, DEFAULT_ACL_XATTR)
    with private_umask():
        (home / "releases" / "ds" / "r2").mkdir()
        (home / "releases" / "ds" / "r2" / "manifest.json").write_text("{}")
    # (the home's own mode is the server start's to fix, with a note: make_home_private)
    open_to_others = [p for p in home.rglob("*") if p.stat().st_mode & 0o077]
    assert open_to_others == []
