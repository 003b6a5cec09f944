"""Who can change what a path names: the folders on it, as given and as resolved.

A release config, a pin file or an input decides what a release reads and whose budget pays;
whoever can write a folder on its path can replace it, or point it (a symlink) at another
custodian's file. :func:`check_path_writers` resolves the path (``os.path.realpath``) and refuses
it when a folder on it, as given or as resolved, belongs to another user than this one or root,
or is writable by its group or by every user (a sticky folder such as /tmp only when its entry
on the path is this user's or root's), as ssh and sudo check their files. Stdlib only.
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from sds_core.errors import SdsInputError

__all__ = ["check_path_writers"]


def check_path_writers(paths: Iterable[str | Path], what: str) -> list[Path]:
    """The resolved ``paths``, once no one but this user and root can change what they name.

    Each folder on each path (as given, then resolved) is checked, the path itself too
    when it is a folder (a Parquet dataset's); a folder that does not exist is left to the
    path's reader, which refuses a missing file.

    Raises:
        SdsInputError: a folder belongs to another user, or its group or every user can write
            it; the message names the folder and the fix.
    """
    seen: set[tuple[Path, Path | None]] = set()
    out = []
    for path in paths:
        given = Path(os.path.abspath(os.fspath(path)))
        real = Path(os.path.realpath(given))
        for chain in (given, real):
            steps = [*reversed(chain.parents), chain]
            pairs: list[tuple[Path, Path | None]] = [*itertools.pairwise(steps), (chain, None)]
            for folder, entry in pairs:
                if (folder, entry) not in seen:
                    seen.add((folder, entry))
                    _check_folder(folder, entry, what, given)
        out.append(real)
    return out


def _check_folder(folder: Path, entry: Path | None, what: str, path: Path) -> None:
    """Refuse ``folder`` (holding ``entry``, the next step to ``path``; None: ``path`` itself)
    if someone other than this user or root can change its entries."""
    try:
        st = os.stat(folder)
    except OSError:  # missing (or not a folder): the reader refuses the path itself
        return
    if not stat.S_ISDIR(st.st_mode):
        return
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        raise SdsInputError(
            f"the folder {folder} on the path of {what} {path} belongs to another user (uid "
            f"{st.st_uid}), who can replace what it holds: keep {what} in folders of your own "
            "(or root's)"
        )
    mode = stat.S_IMODE(st.st_mode)
    if not mode & (stat.S_IWGRP | stat.S_IWOTH):
        return
    if mode & stat.S_ISVTX and entry is not None:  # others may add entries, not replace ours
        try:
            owner = os.lstat(entry).st_uid
        except OSError:
            return
        if owner in (me, 0):
            return
        raise SdsInputError(
            f"{entry} on the path of {what} {path} belongs to another user (uid {owner}) in "
            f"the shared folder {folder}, who can replace it: keep {what} in folders of your "
            "own"
        )
    who, bits = (
        ("every user", "o-w")
        if mode & stat.S_IWOTH and not mode & stat.S_IWGRP
        else ("its group", "g-w")
        if not mode & stat.S_IWOTH
        else ("its group and every user", "go-w")
    )
    raise SdsInputError(
        f"the folder {folder} on the path of {what} {path} is writable by {who} (mode "
        f"{mode:o}): whoever can write it can replace {what} or point it at another file "
        f"(another custodian's); run `chmod {bits} {folder}`"
    )
