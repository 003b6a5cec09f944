"""`sds audit`: every release of a home with its privacy spend, plus integrity checks.

Lists the releases under ``$SDS_HOME/releases`` and the ledger's reservations; with
``verify=True`` also checks the ledger hash chain, each release directory against its
manifest (:func:`sds_release.store.workspace.integrity.verify_release`), the manifest against the
ledger, the ledger head each complete release anchored (a commitment in the manifest, opened with
the release's private record and key: :mod:`sds_release.store.ledger.anchor`) against the chain, and
a
signed release's signature against the home's signing keys (:func:`signature_problems`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sds_core.errors import SdsInputError
from sds_release.store.ledger.anchor import ANCHOR_FILE, anchor_key, anchor_problems
from sds_release.store.ledger.backends import resolve_ledger_url, sqlite_path
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.chain import VerifyReport
from sds_release.store.ledger.periods import label_problem
from sds_release.store.ledger.values import BudgetStatus
from sds_release.store.run.workdir import ReleaseDirs
from sds_release.store.workspace.home import MANIFEST, PUBLIC_KEY, SIGNATURE, find_release
from sds_release.store.workspace.integrity import verify_release
from sds_release.store.workspace.manifest import Manifest


@dataclass(frozen=True, slots=True)
class ReleaseAudit:
    """One release as the audit sees it (manifest and/or ledger)."""

    dataset: str
    release_id: str
    status: str  # manifest status, or "no directory" for a ledger-only release
    created_at: str | None
    epsilon: float | None  # the manifest's privacy claim
    delta: float | None
    ledger_status: str | None  # open | completed | cancelled | None (not in the ledger)
    epsilon_spent: float | None  # what the ledger counts against the dataset
    delta_spent: float | None
    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    report: str | None = None  # path of report.html of a complete release
    signed_by: str | None = None  # key id of a verified signature (None: unsigned/unchecked)
    period: str | None = None  # the period released (a dataset with a per-period budget)


@dataclass(frozen=True, slots=True)
class AuditReport:
    """All releases, budgets and (when verified) every problem found."""

    home: str
    verified: bool
    releases: tuple[ReleaseAudit, ...]
    budgets: tuple[BudgetStatus, ...]
    ledger: VerifyReport | None
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """No problem found (only meaningful when ``verified``)."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (for ``--json``)."""
        out = asdict(self)
        out["ok"] = self.ok
        return out

    def spend_lines(self) -> list[str]:
        """One line per dataset whose budget is per period: each period's spend and what it has
        left (and the lifetime cap), from the ledger."""
        out = []
        for b in self.budgets:
            if not b.per_period:
                continue
            periods = "; ".join(
                f"period {p.period} spent ε {p.epsilon_spent:.6g} (reserved "
                f"{p.epsilon_reserved:.6g}), ε {p.epsilon_remaining:.6g} left"
                for p in b.periods
            )
            cap = (
                ""
                if b.lifetime_epsilon is None
                else f"; lifetime cap ε {b.lifetime_epsilon:.6g}, ε "
                f"{b.epsilon_cap_remaining:.6g} left across periods"
            )
            out.append(
                f"dataset {b.dataset}: {b.describe_budget()}; {periods or 'no period released'}"
                f"{cap}"
            )
        return out

    def table_rows(self) -> list[dict[str, str]]:
        """One row of strings per release, for a rich table."""

        def num(x: float | None, fmt: str) -> str:
            return "" if x is None else format(x, fmt)

        return [
            {
                "dataset": r.dataset,
                "release": r.release_id,
                "period": r.period or "-",
                "status": r.status,
                "ledger": r.ledger_status or "-",
                "epsilon": num(r.epsilon_spent, ".6g"),
                "delta": num(r.delta_spent, ".3g"),
                "artifacts": str(len(r.artifacts)),
                "check": ("ok" if not r.problems else f"{len(r.problems)} problem(s)")
                if self.verified
                else "-",
            }
            for r in self.releases
        ]


def report_path(home: str | Path, release_id: str) -> Path:
    """The ``report.html`` of a complete release of ``home``.

    Raises:
        SdsInputError: bad id, no such release, release not complete, or no report in it.
    """
    release_dir = find_release(home, release_id)
    if release_dir is None:
        raise SdsInputError(
            f"no release {release_id!r} under {Path(home) / 'releases'}; `sds audit` lists the "
            "releases of a home (pass --home DIR or set SDS_HOME if it is elsewhere)"
        )
    status = Manifest.load(release_dir / MANIFEST).status
    if status != "complete":
        raise SdsInputError(
            f"release {release_id!r} is {status}, not complete, so it has no report; finish it "
            f"with `sds resume {release_id}` or abandon it with `sds cancel {release_id}`"
        )
    report = release_dir / "report.html"
    if not report.is_file():
        raise SdsInputError(
            f"release {release_id!r} is complete but has no report.html ({release_dir}); it "
            "was published by a version without reports, or the file was removed "
            "(`sds audit --verify` checks the release's files)"
        )
    return report


def signature_problems(home: Path, release_dir: Path) -> tuple[str | None, list[str]]:
    """A signed release's signature, for its own home: (key id when valid, problems).

    The signature must check and the key must be one of the home's signing keys (current or
    retired). A release without ``manifest.sig`` is not a problem here: releases published
    before signing existed have none (``sds sign RELEASE_ID`` signs them).
    """
    from sds_release.store.audit.signing import check_signature, home_public_keys, key_id

    if not (release_dir / SIGNATURE).exists() and not (release_dir / PUBLIC_KEY).exists():
        return None, []
    key, valid, problems = check_signature(release_dir)
    if key is not None and valid and key_id(key) not in home_public_keys(home):
        problems.append(
            f"signed by key {key_id(key)}, which is not one of this home's signing keys "
            "(`sds signing-key show`)"
        )
    return (key_id(key) if key is not None and valid and not problems else None), problems


def _manifests(home: Path, dataset: str | None) -> list[Path]:
    root = home / "releases"
    pattern = f"{dataset}/*" if dataset else "*/*"
    return sorted(p for p in root.glob(pattern) if p.is_dir()) if root.is_dir() else []


def _period_label_problems(ledger: Ledger, budgets: list[BudgetStatus]) -> list[str]:
    """One problem per period of a per-period dataset that the ledger holds under a label not
    written in the dataset's period format: its budget may be spent again under the canonical
    label (a ledger written before labels were checked)."""
    out = []
    for b in budgets:
        fmt = ledger.period_format(b.dataset)
        if fmt is None:
            continue
        for p in b.periods:
            problem = label_problem(str(p.period), fmt)
            if problem is not None:
                used = p.epsilon_spent + p.epsilon_reserved
                out.append(
                    f"ledger: dataset {b.dataset!r} holds the period label {p.period!r} (ε "
                    f"{used:.6g} spent or reserved), which is not a period written {fmt}: its "
                    "rows may have been released again under another spelling of the period, "
                    "each from its own budget (docs/ledger.md, one spelling per period)"
                )
    return out


def _anchor_problems(
    home: Path, release_dir: Path, ledger: Ledger | None, anchor: object
) -> list[str]:
    """The manifest's ``ledger_head`` opened with the release's private anchor record and key
    (:mod:`sds_release.store.ledger.anchor`), then checked against the ledger."""
    dirs = ReleaseDirs(home, release_dir.parent.name, release_dir.name)
    record = dirs.private_dir / ANCHOR_FILE
    try:
        head = json.loads(record.read_text()) if record.is_file() else None
        key = anchor_key(dirs.release_key())
    except (OSError, ValueError):  # unreadable (SdsInputError: no release key): not opened
        head, key = None, None
    return anchor_problems(ledger, anchor, private_head=head, key=key)


def audit_home(
    home: str | Path,
    dataset: str | None = None,
    *,
    verify: bool = False,
    ledger_url: str | None = None,
) -> AuditReport:
    """Audit a home (nothing is created or modified, except a PostgreSQL ledger's empty tables).

    Args:
        home: the SDS home directory.
        dataset: only this dataset's releases and budget.
        verify: check the ledger chain, every artifact's sha256 and manifest vs ledger.
        ledger_url: the ledger (default $SDS_LEDGER_URL, else the home's SQLite file, which
            is not created when absent).
    """
    home = Path(home)
    url = resolve_ledger_url(home, ledger_url)
    path = sqlite_path(url)
    ledger = Ledger.from_url(url) if path is None or path.is_file() else None
    chain = ledger.verify() if ledger is not None and verify else None
    problems = [f"ledger: {p}" for p in chain.problems] if chain else []
    releases, seen = [], set()
    for release_dir in _manifests(home, dataset):
        rid = release_dir.name
        seen.add(rid)
        found = verify_release(release_dir) if verify else []
        signed_by = None
        if verify:
            signed_by, bad = signature_problems(home, release_dir)
            found += bad
        try:
            m = Manifest.load(release_dir / MANIFEST).data
        except ValueError:
            m = {"status": "unreadable"}
        res = ledger.reservation(rid) if ledger else None
        spent = ledger.spent(rid) if ledger else None
        privacy = m.get("privacy") or {}
        if verify and m.get("status") == "complete":
            if res is None:
                found.append("complete release has no reservation in the ledger")
            else:
                if res.status != "completed":
                    found.append(f"ledger reservation is {res.status}, not completed")
                claim = privacy.get("epsilon")
                if claim is None or not math.isclose(float(claim), res.epsilon, rel_tol=1e-12):
                    found.append(
                        f"manifest epsilon {claim} differs from the ledger's "
                        f"reserved epsilon {res.epsilon}"
                    )
                recorded = (m.get("parameters") or {}).get("period")
                if recorded != res.period:
                    found.append(
                        f"manifest period {recorded!r} differs from the ledger reservation's "
                        f"period {res.period!r}"
                    )
            found += _anchor_problems(home, release_dir, ledger, m.get("ledger_head"))
        releases.append(
            ReleaseAudit(
                dataset=release_dir.parent.name,
                release_id=rid,
                status=str(m.get("status")),
                created_at=m.get("created_at"),
                epsilon=privacy.get("epsilon"),
                delta=privacy.get("delta"),
                ledger_status=res.status if res else None,
                epsilon_spent=spent[0] if spent else None,
                delta_spent=spent[1] if spent else None,
                parameters=dict(m.get("parameters") or {}),
                artifacts=dict(m.get("artifacts") or {}),
                problems=tuple(found),
                report=str(release_dir / "report.html")
                if m.get("status") == "complete" and (release_dir / "report.html").is_file()
                else None,
                signed_by=signed_by,
                period=res.period if res else (m.get("parameters") or {}).get("period"),
            )
        )
        problems += [f"{release_dir.parent.name}/{rid}: {p}" for p in found]
    budgets: list[BudgetStatus] = []
    if ledger is not None:
        budgets = [b for b in ledger.datasets() if dataset in (None, b.dataset)]
        if verify:
            problems += _period_label_problems(ledger, budgets)
        for res in ledger.reservations(dataset):
            if res.release_id not in seen:
                spent = ledger.spent(res.release_id)
                releases.append(
                    ReleaseAudit(
                        dataset=res.dataset,
                        release_id=res.release_id,
                        status="no directory",
                        created_at=res.created_at,
                        epsilon=None,
                        delta=None,
                        ledger_status=res.status,
                        epsilon_spent=spent[0] if spent else None,
                        delta_spent=spent[1] if spent else None,
                        period=res.period,
                    )
                )
    releases.sort(key=lambda r: (r.dataset, r.created_at or "", r.release_id))
    return AuditReport(
        home=str(home),
        verified=verify,
        releases=tuple(releases),
        budgets=tuple(budgets),
        ledger=chain,
        problems=tuple(problems),
    )
