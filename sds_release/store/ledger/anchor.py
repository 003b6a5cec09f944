"""The ledger head a complete release anchors, and the check of that anchor against the chain.

The hash chain alone cannot reveal a ledger truncated or rewritten as a whole (with its head moved
along); a head recorded outside the ledger, with each complete release, can. The head (its row
number and hash) is kept in the release's private workspace (``ledger-anchor.json``); the public
manifest gets only a keyed commitment to the head's hash (``ledger_head.commitment``), which
reveals neither how many rows the ledger holds (a refused or failed release would show as a
jump in the row numbers) nor anything a ledger row records (times that follow how long the
stages took). ``sds audit --verify`` opens it with the release's key and checks the row.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

from sds_release.store.ledger.book import Ledger

__all__ = [
    "ANCHOR_FILE",
    "ANCHOR_SCHEME",
    "anchor_commitment",
    "anchor_key",
    "anchor_problems",
    "ledger_anchor",
]

ANCHOR_FILE = "ledger-anchor.json"
"""The private record of the anchored head (``{"seq", "hash"}``), in ``private/<release-id>/``."""

ANCHOR_SCHEME = "hmac-sha256"
"""``ledger_head.commitment_scheme``: HMAC-SHA256 under :func:`anchor_key` of the row's hash."""

_HOW_TO_CHECK = (
    "HMAC-SHA256, keyed by a key derived from the release's private key, of the hash of the "
    "ledger row that was the ledger's head when the release completed (the row and its hash "
    "are kept in private/<release-id>/ledger-anchor.json): `sds audit --verify` opens it and "
    "checks that the ledger still holds that row with that hash"
)


def ledger_anchor(home: str | Path, ledger_url: str | None = None) -> dict[str, Any]:
    """The ledger head ``{"seq", "hash"}`` a release anchors as it turns complete (private).

    The hash chain alone cannot reveal a ledger truncated or rewritten as a whole (with its
    head moved along); a head recorded outside the ledger can.
    """
    seq, digest = Ledger.open(home, ledger_url).head()
    return {"seq": seq, "hash": digest}


def anchor_key(release_key: bytes) -> bytes:
    """The anchor commitment's key, derived from the release key (which never leaves the
    private workspace): a key of its own, so it unlocks no noise.

    >>> anchor_key(bytes(32)).hex()[:16]
    '8372f28a1f596426'
    """
    return hashlib.sha256(b"sds-ledger-anchor\0" + bytes(release_key)).digest()


def anchor_commitment(key: bytes, head_hash: str) -> dict[str, str]:
    """The manifest's ``ledger_head``: a commitment to ``head_hash`` under ``key``.

    >>> anchor_commitment(bytes(32), "ab" * 32)["commitment"][:16]
    '95a3a76807eb706d'
    """
    mac = hmac.new(key, head_hash.lower().encode("ascii"), hashlib.sha256).hexdigest()
    return {"commitment": mac, "commitment_scheme": ANCHOR_SCHEME, "commitment_note": _HOW_TO_CHECK}


def anchor_problems(
    ledger: Ledger | None,
    anchor: object,
    *,
    private_head: object = None,
    key: bytes | None = None,
) -> list[str]:
    """Problems of a complete manifest's ``ledger_head`` against the ledger (empty = anchored).

    ``anchor`` is the manifest's ``ledger_head``: a commitment (opened with ``key``, the
    release's :func:`anchor_key`, to ``private_head``, the private ``{"seq", "hash"}`` record),
    or, in releases made before commitments, the plain ``{"seq", "hash"}``.
    """
    if isinstance(anchor, dict) and isinstance(anchor.get("commitment"), str):
        if not (
            isinstance(private_head, dict)
            and isinstance(private_head.get("seq"), int)
            and isinstance(private_head.get("hash"), str)
            and key is not None
        ):
            return [
                f"the ledger head this release anchored cannot be opened: its private record "
                f"({ANCHOR_FILE}) or its release key is missing from the private workspace"
            ]
        opened = anchor_commitment(key, private_head["hash"])["commitment"]
        if anchor.get("commitment_scheme") != ANCHOR_SCHEME or not hmac.compare_digest(
            opened, anchor["commitment"]
        ):
            return [
                "the manifest's ledger_head commitment does not open to the ledger head "
                f"recorded privately ({ANCHOR_FILE}): the manifest or that record was changed"
            ]
        head = private_head
    elif (
        isinstance(anchor, dict)
        and isinstance(anchor.get("seq"), int)
        and isinstance(anchor.get("hash"), str)
    ):
        head = anchor  # a release made before anchors were commitments
    else:
        return [
            "manifest records no ledger head (ledger_head), so the ledger is not anchored by "
            "this release"
        ]
    seq = head["seq"]
    actual = ledger.hash_at(seq) if ledger is not None else None
    if actual is None:
        return [
            f"the ledger has no row {seq}, the head recorded when this release completed: "
            "the ledger was truncated or replaced"
        ]
    if actual != head["hash"]:
        return [
            f"ledger row {seq} no longer has the hash recorded when this release "
            "completed: the ledger was rewritten"
        ]
    return []
