"""The ledger head a complete manifest records, and the check of that anchor against the chain.

The hash chain alone cannot reveal a ledger truncated or rewritten as a whole (with its head moved
along); a head recorded outside the ledger, in each complete manifest, can.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from release_store.ledger.book import Ledger


def ledger_anchor(home: str | Path, ledger_url: str | None = None) -> dict[str, Any]:
    """The ledger head ``{"seq", "hash"}`` to record in a manifest as it turns complete.

    The hash chain alone cannot reveal a ledger truncated or rewritten as a whole (with its
    head moved along); a head recorded outside the ledger can.
    """
    seq, digest = Ledger.open(home, ledger_url).head()
    return {"seq": seq, "hash": digest}


def anchor_problems(ledger: Ledger | None, anchor: object) -> list[str]:
    """Problems of a complete manifest's ``ledger_head`` against the ledger (empty = anchored)."""
    if not (
        isinstance(anchor, dict)
        and isinstance(anchor.get("seq"), int)
        and isinstance(anchor.get("hash"), str)
    ):
        return [
            "manifest records no ledger head (ledger_head: seq, hash), so the ledger is "
            "not anchored by this release"
        ]
    seq = anchor["seq"]
    actual = ledger.hash_at(seq) if ledger is not None else None
    if actual is None:
        return [
            f"the ledger has no row {seq}, the head recorded when this release completed: "
            "the ledger was truncated or replaced"
        ]
    if actual != anchor["hash"]:
        return [
            f"ledger row {seq} no longer has the hash recorded when this release "
            "completed: the ledger was rewritten"
        ]
    return []
