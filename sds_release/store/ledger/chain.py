"""The ledger's hash chain: appending a chained row, copying rows verbatim, verifying the chain.

Every ledger row (budget, reserve, charge, close) is chained: ``hash`` = sha256 of the row's
canonical JSON including ``prev_hash`` (the previous row's hash; 64 zeros for the first row).
``meta`` keeps the head (last seq and hash) so that removing the last rows is detected too.
Backend-neutral: the SQL here runs unchanged on SQLite and PostgreSQL
(:mod:`sds_release.store.ledger.backends`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from sds_release.store.ledger.backends import Conn, LedgerCorruptError
from sds_release.store.ledger.schema import SCHEMA_VERSION
from sds_release.store.ledger.values import LedgerConflictError

GENESIS_HASH = "0" * 64
FIELDS = (
    "seq",
    "kind",
    "dataset",
    "release_id",
    "stage",
    "mechanism",
    "epsilon",
    "delta",
    "rho",
    "created_at",
    "flow_run_id",
    "detail",
    "prev_hash",
)


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Result of the hash-chain check: ``ok`` and one line per problem found."""

    ok: bool
    rows: int
    head_hash: str
    problems: tuple[str, ...]
    broken_seqs: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for --json)."""
        return asdict(self)


def row_hash(content: dict[str, Any]) -> str:
    """sha256 hex of a row's canonical JSON (all FIELDS incl. prev_hash, sorted keys, no spaces)."""
    canonical = json.dumps(
        {k: content[k] for k in FIELDS}, sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def append_row(conn: Conn, where: str, values: dict[str, Any]) -> Any:
    """Append one chained row inside the caller's write transaction and move the head.

    Args:
        conn: a connection inside the backend's write transaction.
        where: the ledger's (redacted) URL, for messages.
        values: kind, dataset and any of release_id, stage, mechanism, epsilon, delta (decimal
            strings), rho, flow_run_id, detail (dict); seq, created_at and hashes are filled in.

    Raises:
        LedgerCorruptError: the last row does not match the recorded head (rows removed/edited).
    """
    last = conn.execute("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1").fetchone()
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    seq, prev = (last[0], last[1]) if last else (0, GENESIS_HASH)
    if (str(seq), prev) != (meta["head_seq"], meta["head_hash"]):
        raise LedgerCorruptError(
            f"{where}: the last ledger row (seq {seq}) does not match the recorded head "
            f"(seq {meta['head_seq']}): rows were removed or edited. Run `sds audit --verify`."
        )
    detail = values.get("detail")
    content = {k: values.get(k) for k in FIELDS}
    content.update(
        seq=seq + 1,
        prev_hash=prev,
        created_at=datetime.now(UTC).isoformat(timespec="microseconds"),
        detail=None if detail is None else json.dumps(detail, sort_keys=True),
    )
    digest = row_hash(content)
    conn.execute(
        f"INSERT INTO ledger ({', '.join(FIELDS)}, hash) "
        f"VALUES ({', '.join('?' * len(FIELDS))}, ?)",
        [content[k] for k in FIELDS] + [digest],
    )
    conn.execute("UPDATE meta SET value = ? WHERE key = 'head_seq'", (str(seq + 1),))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (digest,))
    return conn.execute("SELECT * FROM ledger WHERE seq = ?", (seq + 1,)).fetchone()


def copy_rows(conn: Conn, where: str, rows: Sequence[dict[str, Any]]) -> int:
    """Append ``rows`` verbatim (same seq, times and hashes) after the ledger's own rows, which
    must be exactly the first rows of ``rows`` (or begin with all of them: nothing to do);
    returns how many were appended (``sds ledger migrate``; ``where``: the ledger URL).

    Raises:
        LedgerConflictError: the ledger holds rows that are not a prefix of ``rows``.
    """
    columns = (*FIELDS, "hash")
    mine = [(r[0], r[1]) for r in conn.execute("SELECT seq, hash FROM ledger ORDER BY seq")]
    theirs = [(r["seq"], r["hash"]) for r in rows]
    if mine[: len(theirs)] != theirs[: len(mine)]:
        raise LedgerConflictError(
            f"the ledger {where} already holds {len(mine)} rows that are not the "
            "start of the ledger being copied; migrate into an empty database"
        )
    if len(mine) >= len(theirs):
        return 0  # copied before (and maybe written to since)
    new = rows[len(mine) :]
    for r in new:
        conn.execute(
            f"INSERT INTO ledger ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            [r[c] for c in columns],
        )
    if rows:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'head_seq'", (str(rows[-1]["seq"]),))
        conn.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (rows[-1]["hash"],))
    return len(new)


def verify_chain(conn: Conn) -> VerifyReport:
    """Walk every row in seq order and check seq continuity, prev_hash links, hashes and head.

    Detects an edited row (its hash no longer matches), a deleted or inserted row (seq gap or
    broken link), reordered rows (broken links) and a truncated tail (head mismatch).
    """
    problems: list[str] = []
    broken: set[int] = set()
    prev, expected_seq, rows = GENESIS_HASH, 1, 0
    for row in conn.execute(f"SELECT {', '.join(FIELDS)}, hash FROM ledger ORDER BY seq"):
        rows += 1
        content = dict(zip((*FIELDS, "hash"), row, strict=True))
        seq = content["seq"]
        if seq != expected_seq:
            problems.append(
                f"row seq {seq}: expected seq {expected_seq} (rows deleted or inserted)"
            )
            broken.add(seq)
        if content["prev_hash"] != prev:
            problems.append(
                f"row seq {seq}: prev_hash does not link to the previous row "
                "(a row before it was deleted, inserted, edited or reordered)"
            )
            broken.add(seq)
        if row_hash(content) != content["hash"]:
            problems.append(f"row seq {seq}: content does not match its hash (row edited)")
            broken.add(seq)
        prev, expected_seq = content["hash"], seq + 1
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if (meta.get("head_seq"), meta.get("head_hash")) != (str(expected_seq - 1), prev):
        problems.append(
            f"ledger head: recorded seq {meta.get('head_seq')} with hash "
            f"{str(meta.get('head_hash'))[:12]}…, found seq {expected_seq - 1} with hash "
            f"{prev[:12]}… (rows at the end were removed, or the head was edited)"
        )
    if meta.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"unknown schema version {meta.get('schema_version')!r}")
    return VerifyReport(
        ok=not problems,
        rows=rows,
        head_hash=prev,
        problems=tuple(problems),
        broken_seqs=tuple(sorted(broken)),
    )
