"""``sds ledger migrate``: copy a ledger (e.g. the home's SQLite file) to another URL, verified.

Every row is copied verbatim (same seq, times and hashes), so the hash chain and every
manifest's ``ledger_head`` anchor stay valid; the copy is verified row by row and by its chain,
and only then is the source made read-only (``moved_to``), so no release can spend from both.
Re-running after an interruption copies only the rows still missing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sds_release.store.ledger.backends import LedgerCorruptError
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.chain import GENESIS_HASH
from sds_release.store.ledger.values import LedgerConflictError


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What a migration copied and how it was checked."""

    source: str
    target: str
    rows: int
    copied: int
    head_seq: int
    head_hash: str

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for --json)."""
        return asdict(self)


def migrate_ledger(source: Ledger, target: Ledger) -> MigrationReport:
    """Copy ``source`` into ``target``, verify the copy, then make ``source`` read-only.

    Raises:
        LedgerCorruptError: the source's chain does not verify (nothing is copied), or the copy
            differs from the source.
        LedgerConflictError: the target holds other rows, or the source changed meanwhile.
    """
    if source.url == target.url:
        raise LedgerConflictError(f"the ledger {source.url} cannot be migrated onto itself")
    moved = source.moved_to()
    if moved is not None and moved != target.url:
        raise LedgerConflictError(f"the ledger {source.url} was already migrated to {moved}")
    check = source.verify()
    if not check.ok:
        raise LedgerCorruptError(
            f"the ledger {source.url} fails its integrity check, so it is not copied: "
            + "; ".join(check.problems)
        )
    rows = source.rows()
    copied = target.extend_chain(rows)
    if target.rows()[: len(rows)] != rows:
        raise LedgerCorruptError(f"the copy in {target.url} differs from {source.url}")
    head = (rows[-1]["seq"], rows[-1]["hash"]) if rows else (0, GENESIS_HASH)
    report = target.verify()
    if not report.ok:
        raise LedgerCorruptError(
            f"the copy in {target.url} does not verify: " + "; ".join(report.problems)
        )
    if moved is None:
        source.mark_moved(target.url, head)
    seq, digest = target.head()
    return MigrationReport(source.url, target.url, len(rows), copied, seq, digest)
