"""The audit trail of a home: every release run and refusal, what it spent, and whether it verifies.

Brings together the ledger (reservations, what each release spent or still holds, the budgets
set over time, the hash chain), the releases' directories checked now (``sds audit --verify``:
files, signature, manifest against the ledger) and the run journal (who or what started each
run, the refused releases: :mod:`sds_release.store.audit.journal`). Spends and budgets come from
the ledger itself, never from a published manifest. Nothing is written and nothing is charged;
the sensitive data is not read. :mod:`sds_release.store.audit.page` renders it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sds_release.store.audit.home import ReleaseAudit, audit_home
from sds_release.store.audit.journal import JournalEntry, read_journal
from sds_release.store.ledger.backends import resolve_ledger_url, sqlite_path
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.budget_view import BudgetView
from sds_release.store.ledger.values import Reservation

__all__ = ["AuditTrail", "DatasetTotals", "TrailEntry", "audit_trail"]


@dataclass(frozen=True, slots=True)
class TrailEntry:
    """One release (or one refused attempt) as the audit page lists it.

    ``epsilon_before``/``epsilon_after`` are what the dataset's budget (a per-period dataset:
    the period's budget) had left before and after this release, adding up the releases in the
    order they were reserved, each with what it finally spent (an unfinished one: what it still
    holds) against the budget set at the time. A refused attempt spent nothing: before = after.
    """

    dataset: str
    release_id: str
    period: str | None
    started_at: str | None
    state: str  # complete | failed | running | cancelled | refused | no directory
    runs: int  # how many runs started it (more than 1: resumed)
    origin: str  # who or what started its first run
    later_runs: tuple[str, ...]  # the resumes: who and when
    epsilon_asked: float | None
    delta_asked: float | None
    epsilon_spent: float
    delta_spent: float
    held: bool  # an open reservation: ε/δ held until it completes or is cancelled
    epsilon_before: float | None
    epsilon_after: float | None
    delta_before: float | None
    delta_after: float | None
    verification: str  # ok | n problem(s) | not checked (refused: nothing to check)
    problems: tuple[str, ...] = ()
    signed_by: str | None = None
    reason: str | None = None  # refused: why
    flow_runs: tuple[str, ...] = ()

    @property
    def resumed(self) -> bool:
        """Run more than once (``sds resume``, or a retried deployment run)."""
        return self.runs > 1

    @property
    def state_text(self) -> str:
        """``complete``, ``resumed, complete``, ``refused``..."""
        return f"resumed, {self.state}" if self.resumed else self.state


@dataclass(frozen=True, slots=True)
class DatasetTotals:
    """A dataset's budget now, as ``sds budget show`` prints it (the same rows), and the sum of
    its releases' spends on this page (which must equal the ledger's spent + reserved)."""

    dataset: str
    per_period: bool
    rows: tuple[tuple[str, ...], ...]  # sds budget show's rows for the dataset
    epsilon_spent: float
    epsilon_reserved: float
    epsilon_remaining: float
    delta_remaining: float
    runway: int | None
    entries_epsilon: float  # Σ of the page's releases' spent (+ held) ε
    curve: tuple[tuple[str, float], ...]  # (reserved at, cumulative ε spent or held)


@dataclass(frozen=True, slots=True)
class AuditTrail:
    """Everything the audit page shows."""

    home: str
    dataset: str | None
    generated_at: str
    ledger_url: str | None
    ledger_ok: bool | None  # None: no ledger
    ledger_rows: int
    ledger_problems: tuple[str, ...]
    entries: tuple[TrailEntry, ...]
    datasets: tuple[DatasetTotals, ...]
    problems: tuple[str, ...] = field(default_factory=tuple)


def _when(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _state(audit: ReleaseAudit | None, res: Reservation | None) -> str:
    status = audit.status if audit is not None else "no directory"
    if status == "complete":
        return "complete"
    if status == "failed":
        return "failed"
    if res is not None and res.status == "cancelled":
        return "cancelled"
    if status == "running":
        return "running" if res is None or res.status == "open" else status
    return status


def _budget_history(rows: list[dict[str, Any]]) -> dict[str, list[tuple[int, float, float]]]:
    """Per dataset, its budget rows in chain order: (seq, ε, δ) (per period: each period's)."""
    out: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for r in rows:
        if r["kind"] == "budget":
            out[str(r["dataset"])].append((int(r["seq"]), float(r["epsilon"]), float(r["delta"])))
    return out


def _budget_at(history: list[tuple[int, float, float]], seq: int) -> tuple[float, float] | None:
    found = None
    for s, eps, delta in history:
        if s > seq:
            break
        found = (eps, delta)
    return found


def audit_trail(
    home: str | Path,
    dataset: str | None = None,
    *,
    ledger_url: str | None = None,
    now: str | None = None,
) -> AuditTrail:
    """The audit trail of ``home`` (or of one dataset), checked now.

    Args:
        home: the SDS home.
        dataset: only this dataset.
        ledger_url: the ledger (default $SDS_LEDGER_URL, else the home's SQLite file, which is
            not created when absent).
        now: the time written on the page (default: now, UTC).
    """
    from sds_release.store.workspace.home import utc_now

    home = Path(home)
    checked = audit_home(home, dataset, verify=True, ledger_url=ledger_url)
    by_id = {r.release_id: r for r in checked.releases}
    url = resolve_ledger_url(home, ledger_url)
    path = sqlite_path(url)
    ledger = Ledger.from_url(url) if path is None or path.is_file() else None
    journal = [e for e in read_journal(home) if dataset in (None, e.dataset)]
    starts: dict[str, list[JournalEntry]] = defaultdict(list)
    for e in journal:
        if e.event == "start":
            starts[e.release_id].append(e)

    entries: list[TrailEntry] = []
    totals: list[DatasetTotals] = []
    reservations = ledger.reservations(dataset) if ledger is not None else []
    rows = ledger.rows() if ledger is not None else []
    reserve_seq = {str(r["release_id"]): int(r["seq"]) for r in rows if r["kind"] == "reserve"}
    budgets = _budget_history(rows)
    used: dict[tuple[str, str | None], tuple[float, float]] = defaultdict(lambda: (0.0, 0.0))
    curve: dict[str, list[tuple[str, float]]] = defaultdict(list)
    running_total: dict[str, float] = defaultdict(float)
    seen: set[str] = set()
    for res in reservations:
        seen.add(res.release_id)
        spent = ledger.spent(res.release_id) if ledger is not None else None
        eps_spent, delta_spent = spent if spent is not None else (0.0, 0.0)
        held = res.status == "open"
        use = (res.epsilon, res.delta) if held else (eps_spent, delta_spent)
        seq = reserve_seq.get(res.release_id, 0)
        life = _budget_at(budgets.get(res.dataset, []), seq)
        key = (res.dataset, res.period)
        before = None if life is None else (life[0] - used[key][0], life[1] - used[key][1])
        used[key] = (used[key][0] + use[0], used[key][1] + use[1])
        after = None if before is None else (before[0] - use[0], before[1] - use[1])
        running_total[res.dataset] += use[0]
        curve[res.dataset].append((res.created_at, running_total[res.dataset]))
        audit = by_id.get(res.release_id)
        runs = starts.get(res.release_id, [])
        first = runs[0].origin.describe() if runs else _unrecorded(res.flow_run_id)
        later = tuple(f"{e.origin.describe()} at {e.at[:19].replace('T', ' ')}" for e in runs[1:])
        problems = audit.problems if audit is not None else ()
        entries.append(
            TrailEntry(
                dataset=res.dataset,
                release_id=res.release_id,
                period=res.period,
                started_at=res.created_at,
                state=_state(audit, res),
                runs=max(len(runs), _flow_runs(ledger, res)),
                origin=first,
                later_runs=later,
                epsilon_asked=res.epsilon,
                delta_asked=res.delta,
                epsilon_spent=eps_spent,
                delta_spent=delta_spent,
                held=held,
                epsilon_before=None if before is None else before[0],
                epsilon_after=None if after is None else after[0],
                delta_before=None if before is None else before[1],
                delta_after=None if after is None else after[1],
                verification=_verification(audit, problems),
                problems=tuple(problems),
                signed_by=audit.signed_by if audit is not None else None,
                flow_runs=tuple(
                    dict.fromkeys(e.origin.flow_run_id for e in runs if e.origin.flow_run_id)
                ),
            )
        )
    for e in journal:
        if e.event != "refused":
            continue
        left = _left_at(e, budgets, reservations, ledger)
        entries.append(
            TrailEntry(
                dataset=e.dataset,
                release_id=e.release_id,
                period=e.period,
                started_at=e.at,
                state="refused",
                runs=1,
                origin=e.origin.describe(),
                later_runs=(),
                epsilon_asked=e.epsilon,
                delta_asked=e.delta,
                epsilon_spent=0.0,
                delta_spent=0.0,
                held=False,
                epsilon_before=None if left is None else left[0],
                epsilon_after=None if left is None else left[0],
                delta_before=None if left is None else left[1],
                delta_after=None if left is None else left[1],
                verification="nothing to check (refused before anything was reserved)",
                reason=e.reason,
            )
        )
    for audit in checked.releases:  # a directory without a reservation (another ledger)
        if audit.release_id in seen or audit.status == "no directory":
            continue
        entries.append(
            TrailEntry(
                dataset=audit.dataset,
                release_id=audit.release_id,
                period=audit.period,
                started_at=audit.created_at,
                state=_state(audit, None),
                runs=len(starts.get(audit.release_id, [])),
                origin=_unrecorded(None),
                later_runs=(),
                epsilon_asked=audit.epsilon,
                delta_asked=audit.delta,
                epsilon_spent=0.0,
                delta_spent=0.0,
                held=False,
                epsilon_before=None,
                epsilon_after=None,
                delta_before=None,
                delta_after=None,
                verification=_verification(audit, audit.problems),
                problems=audit.problems,
                signed_by=audit.signed_by,
            )
        )
    entries.sort(key=lambda t: (_when(t.started_at) or datetime.min.astimezone(), t.release_id))

    if ledger is not None:
        for status in ledger.datasets():
            if dataset not in (None, status.dataset):
                continue
            view = BudgetView.load(ledger, status.dataset)
            assert view is not None
            mine = [t for t in entries if t.dataset == status.dataset and t.state != "refused"]
            totals.append(
                DatasetTotals(
                    dataset=status.dataset,
                    per_period=status.per_period,
                    rows=tuple(view.period_rows()),
                    epsilon_spent=status.epsilon_spent,
                    epsilon_reserved=status.epsilon_reserved,
                    epsilon_remaining=status.epsilon_remaining,
                    delta_remaining=status.delta_remaining,
                    runway=view.runway,
                    entries_epsilon=sum(
                        (t.epsilon_asked or 0.0) if t.held else t.epsilon_spent for t in mine
                    ),
                    curve=tuple(curve.get(status.dataset, ())),
                )
            )
    chain = checked.ledger
    return AuditTrail(
        home=str(home),
        dataset=dataset,
        generated_at=now or utc_now(),
        ledger_url=ledger.url if ledger is not None else None,
        ledger_ok=None if chain is None else chain.ok,
        ledger_rows=0 if chain is None else chain.rows,
        ledger_problems=() if chain is None else chain.problems,
        entries=tuple(entries),
        datasets=tuple(totals),
        problems=checked.problems,
    )


def _unrecorded(flow_run_id: str | None) -> str:
    run = f" (flow run {flow_run_id})" if flow_run_id else ""
    return f"not recorded{run}: started before this home kept a run journal"


def _verification(audit: ReleaseAudit | None, problems: tuple[str, ...]) -> str:
    if audit is None:
        return "no release directory"
    return "ok" if not problems else f"{len(problems)} problem(s)"


def _flow_runs(ledger: Ledger | None, res: Reservation) -> int:
    """How many flow runs charged the release (its runs when the journal has none)."""
    if ledger is None:
        return 0
    ids = {c.flow_run_id for c in ledger.charges(release_id=res.release_id) if c.flow_run_id}
    return len(ids | ({res.flow_run_id} if res.flow_run_id else set()))


def _left_at(
    entry: JournalEntry,
    budgets: dict[str, list[tuple[int, float, float]]],
    reservations: list[Reservation],
    ledger: Ledger | None,
) -> tuple[float, float] | None:
    """What the budget of a refused release's dataset (or period) had left when it was refused,
    counted as :class:`TrailEntry` counts it."""
    at = _when(entry.at)
    history = budgets.get(entry.dataset)
    if ledger is None or at is None or not history:
        return None
    eps, delta = history[-1][1], history[-1][2]
    for res in reservations:
        when = _when(res.created_at)
        if res.dataset != entry.dataset or res.period != entry.period or when is None:
            continue
        if when > at:
            continue
        spent = ledger.spent(res.release_id) or (0.0, 0.0)
        use = (res.epsilon, res.delta) if res.status == "open" else spent
        eps, delta = eps - use[0], delta - use[1]
    return eps, delta
