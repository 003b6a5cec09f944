"""How a release fails: a full disk (recognised, and what the user is told), and an outcome of
the DP counts that no resume can change (:class:`NothingToRelease`).

A release can meet a full disk (ENOSPC, or SQLite's "database or disk is full" in the ledger)
at any write: a checkpoint, the ledger, a published file. Every write is atomic or one
transaction, so nothing is left half-written; :meth:`ReleaseRun.mark_failed` records what it
still can and raises :func:`disk_full_error` instead of a bare ``OSError``: free space, then
``sds resume``.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sds_core.errors import SdsInputError

__all__ = [
    "NothingToRelease",
    "disk_full",
    "disk_full_error",
    "error_chain",
    "unless_disk_full",
]

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""No space left on the device, or the user's disk quota exceeded: both are freed the same way."""
SQLITE_FULL = 13  # sqlite3.SQLITE_FULL (Python >= 3.11); "database or disk is full"


class NothingToRelease(SdsInputError):
    """The release's DP counts leave nothing to publish (every count of length 1 suppressed).

    An outcome of noise already drawn, not a fault: a resume draws the same counts from the
    release's key and ends the same way. :meth:`ReleaseRun.mark_failed` therefore closes the
    release (the ledger's cancel: what was drawn stays charged, the rest is given back) instead
    of leaving it open for a resume that cannot help.
    """


def disk_full(error: BaseException) -> BaseException | None:
    """The full-disk error in ``error``'s chain (itself, its cause or context), or None.

    >>> disk_full(OSError(errno.ENOSPC, "No space left on device")) is not None
    True
    >>> disk_full(ValueError("bad cell")) is None
    True
    """
    for e in error_chain(error):
        if isinstance(e, OSError) and e.errno in FULL_ERRNOS:
            return e
        if isinstance(e, sqlite3.OperationalError) and (
            getattr(e, "sqlite_errorcode", None) == SQLITE_FULL or "disk is full" in str(e)
        ):
            return e
    return None


def error_chain(error: BaseException) -> Iterator[BaseException]:
    """``error``, then its cause (or else its context), and so on, each once."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


@contextmanager
def unless_disk_full() -> Iterator[None]:
    """Run a write of the failure record, skipping it when the disk is full (it is best
    effort: the release already failed, and the error to tell is the first one)."""
    try:
        yield
    except Exception as e:
        if disk_full(e) is None:
            raise


def disk_full_error(
    full: BaseException, release_id: str, home: Path, *, resumable: bool
) -> SdsInputError:
    """What a release stopped by a full disk tells the user: where, and how to go on.

    ``resumable``: its reservation is still open (stages were charged, or the full disk kept it
    from being cancelled), so ``sds resume`` finishes it without charging a stage again.
    """
    if isinstance(full, OSError):
        what = f"{full.strerror or 'no space left'}" + (
            f": {full.filename}" if full.filename else ""
        )
    else:
        what = f"the SQLite ledger: {full}"
    if resumable:
        then = (
            f"then finish it with `sds resume {release_id}` (same --home): the stages it "
            "finished are kept, nothing is charged twice and it gives the same files"
        )
    else:
        then = "then start the release again: nothing was charged and its reservation was cancelled"
    return SdsInputError(
        f"the disk is full ({what}); nothing of this release was published. Free space on the "
        f"disk of the home {home} (and of the ledger, when it is elsewhere), {then}"
    )
