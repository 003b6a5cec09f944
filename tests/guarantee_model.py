"""The guarantee fuzz test's own account of the budget (tests/flows/test_guarantee_fuzz.py).

One home and one ledger hold three datasets of tiny tables: ``monthly`` (periodic; a row is the
privacy unit), ``persons`` (the same rows with a subject id: a subject counts in the first period
it is released in) and ``tiny`` (no periods, a lifetime budget). :class:`SpendModel` records what
every step asked for; :meth:`SpendModel.problems` then recomputes each record's total (ε, δ) from
which releases read it, never from the ledger's sums, and checks it against the budgets the
custodian set, next to the ledger's own figures, its chain and ``sds audit --verify`` (issue #37).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.budget_view import BudgetView
from sds_release.store.ledger.values import Reservation
from sds_release.store.workspace.subjects import SubjectRecord
from tests.helpers import periodic_config, write_periodic_csv

MONTHLY, PERSONS, TINY = "monthly", "persons", "tiny"
DATASETS = (MONTHLY, PERSONS, TINY)
ROWS_PER_MONTH = 220
"""Rows (and subjects) of each month: enough for a DP count at ε 1 and lengths 1 and 2."""
TOLERANCE = 1e-9
"""Relative slack of the float comparisons (the ledger keeps exact decimals)."""


def month_index(month: str) -> int:
    """``YYYY-MM`` as a number of months (to shift months).

    >>> month_index("2026-01") - month_index("2025-12")
    1
    """
    year, m = month.split("-")
    return int(year) * 12 + int(m) - 1


def month_name(index: int) -> str:
    """The ``YYYY-MM`` of :func:`month_index`."""
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


def month_of(when: datetime) -> str:
    """The month (UTC) ``when`` falls in."""
    utc = when.astimezone(UTC)
    return f"{utc.year:04d}-{utc.month:02d}"


def previous_month_of(when: datetime) -> str:
    """The month before the one ``when`` falls in (written here, not imported: the model's
    own reading of ``previous-month``)."""
    return month_name(month_index(month_of(when)) - 1)


def months_around(now: datetime) -> tuple[str, ...]:
    """The four months of the periodic data: three before ``now``'s month, and ``now``'s."""
    current = month_index(month_of(now))
    return tuple(month_name(current - k) for k in (3, 2, 1, 0))


def month_in_label(label: str | None, now: datetime) -> str | None:
    """The month a ``--period`` label could mean, read as loosely as any person could mean it
    (whitespace, case, full-width or other Unicode digits, no zero padding, ``2026/10``,
    ``previous-month``): every spelling of a month reads that month's rows here, whatever the
    code decides. None: no label, or one that names no month.

    >>> now = datetime(2026, 11, 2, tzinfo=UTC)
    >>> wide = "\\uff12\\uff10\\uff12\\uff16-\\uff11\\uff10"
    >>> [month_in_label(x, now) for x in ("2026-10 ", wide, "2026-9", "Previous-Month")]
    ['2026-10', '2026-10', '2026-09', '2026-10']
    """
    if label is None:
        return None
    text = unicodedata.normalize("NFKC", label).strip().lower()
    text = "".join(
        str(unicodedata.digit(c)) if unicodedata.digit(c, None) is not None else c for c in text
    )
    if text == "previous-month":
        return previous_month_of(now)
    found = re.fullmatch(r"(\d{4})\D?(\d{1,3})(?:\D\d{1,2})?", text)
    if found is None or not 1 <= int(found[2]) <= 12:
        return None
    return f"{int(found[1]):04d}-{int(found[2]):02d}"


@dataclass(frozen=True, slots=True)
class World:
    """The data, the configs and the months of the fuzz (written once per module)."""

    root: Path
    months: tuple[str, ...]
    periodic_csv: Path
    tiny_csv: Path
    configs: dict[str, Path]
    subjects: dict[str, frozenset[str]]
    """The subjects with rows in each month (``persons``)."""
    now: datetime
    """When the world was made: its months are around this time's month."""

    def data(self, dataset: str) -> Path:
        """The input of ``dataset``."""
        return self.tiny_csv if dataset == TINY else self.periodic_csv

    @classmethod
    def build(cls, root: Path, tiny_csv: Path, now: datetime) -> World:
        """Month k of :func:`months_around` holds tiny rows ``100k..100k+219`` and subjects
        ``s150k..``, so consecutive months share 70 subjects."""
        months = months_around(now)
        rows = {m: range(100 * k, 100 * k + ROWS_PER_MONTH) for k, m in enumerate(months)}
        subjects = {m: range(150 * k, 150 * k + ROWS_PER_MONTH) for k, m in enumerate(months)}
        periodic = write_periodic_csv(tiny_csv, root / "periodic.csv", rows, subjects=subjects)
        configs = {
            MONTHLY: root / "monthly.toml",
            PERSONS: root / "persons.toml",
            TINY: root / "tiny.toml",
        }
        configs[MONTHLY].write_text(periodic_config())
        configs[PERSONS].write_text(
            periodic_config(subject=True).replace('dataset = "monthly"', f'dataset = "{PERSONS}"')
        )
        from tests.helpers import TINY_CONFIG

        configs[TINY].write_text(
            TINY_CONFIG.split("\n[budget]")[0] + "\n[schema]" + TINY_CONFIG.split("[schema]", 1)[1]
        )
        return cls(
            root,
            months,
            periodic,
            tiny_csv,
            configs,
            {m: frozenset(f"s{j}" for j in span) for m, span in subjects.items()},
            now,
        )


@dataclass(frozen=True, slots=True)
class Budget:
    """What the custodian set for a dataset (``sds budget set``), as the model knows it."""

    epsilon: float
    delta: float
    per_period: bool
    cap: float | None = None


@dataclass(frozen=True, slots=True)
class Ask:
    """What one step asked a release for.

    Attributes:
        dataset: the dataset id.
        label: ``--period`` as typed (None: none given).
        epsilon: the release's ε.
        delta: the δ asked (given, else the default of ``max_rows``): the most it may reserve.
        step: the step that asked (shown in the problems).
        allowed: a deployment run of a relative period: the months it may release (its
            schedule slot's, or now's); None: the month of ``label``.
        subjects: the release counts subjects (its config names the subject id): a subject
            counted in another month is left out; else it counts rows, every row of its month.
    """

    dataset: str
    label: str | None
    epsilon: float
    delta: float
    step: str
    allowed: frozenset[str] | None = None
    subjects: bool = True


def _over(spent: float, budget: float) -> bool:
    return spent > budget * (1 + TOLERANCE) + 1e-15


@dataclass
class SpendModel:
    """The budgets set and the releases asked for in one home, and the checks of the guarantee."""

    world: World
    home: Path
    now: datetime
    budgets: dict[str, Budget] = field(default_factory=dict)
    asks: dict[str, list[Ask]] = field(default_factory=lambda: defaultdict(list))

    def asked(self, release_id: str, ask: Ask) -> None:
        """A step asks for release ``release_id``."""
        self.asks[release_id].append(ask)

    def months_spent(self, dataset: str) -> list[str]:
        """The months of ``dataset`` (however spelled) that releases have spent budget on."""
        ledger = Ledger.open(self.home)
        charged = {c.release_id for c in ledger.charges(dataset)}
        return sorted(
            {
                month
                for res in ledger.reservations(dataset)
                if res.release_id in charged
                and (month := month_in_label(res.period, self.now)) is not None
            }
        )

    # -- what the ledger holds --------------------------------------------------------------
    def _ask_of(self, res: Reservation) -> tuple[Ask | None, str | None]:
        """The ask a reservation answers (None and why, when it answers none: an ask of a
        release id may be refused, and the id used again with other settings)."""
        whys = []
        for ask in self.asks.get(res.release_id, []):
            why = self._mismatch(res, ask)
            if why is None:
                return ask, None
            whys.append(why)
        return None, (
            f"release {res.release_id} reserved ({res.dataset}, {res.period!r}, ε {res.epsilon}, "
            f"δ {res.delta:g}), which no step asked: " + ("; ".join(whys) or "no step used its id")
        )

    def _mismatch(self, res: Reservation, ask: Ask) -> str | None:
        """How a reservation differs from an ask (None: it answers it)."""
        if ask.dataset != res.dataset or not _same(ask.epsilon, res.epsilon):
            return f"{ask.step} asked ({ask.dataset}, ε {ask.epsilon})"
        if _over(res.delta, ask.delta):
            return f"{ask.step} asked δ {ask.delta:g}"
        reserved = month_in_label(res.period, self.now)
        if ask.allowed is None and reserved != month_in_label(ask.label, self.now):
            return f"{ask.step} asked the period {ask.label!r}"
        if ask.allowed is not None and reserved not in ask.allowed:
            return (
                f"{ask.step} may release only {sorted(ask.allowed)} (the month before its "
                "schedule slot, or before now): whoever made the run chose the month"
            )
        return None

    def _charged(self, ledger: Ledger) -> set[str]:
        """Releases that drew noise: a charge row in the ledger, or a complete manifest."""
        drawn = {c.release_id for c in ledger.charges()}
        for path in (self.home / "releases").glob("*/*/manifest.json"):
            if json.loads(path.read_text()).get("status") == "complete":
                drawn.add(path.parent.name)
        return drawn

    # -- the checks ---------------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Every way the guarantee does not hold in the home now (empty: it holds)."""
        ledger = Ledger.open(self.home)
        report = ledger.verify()
        problems = [f"ledger chain: {p}" for p in report.problems]
        reservations = ledger.reservations()
        charged = self._charged(ledger)
        reads: list[tuple[Reservation, Ask]] = []
        for res in reservations:
            ask, why = self._ask_of(res)
            if why is not None:
                problems.append(why)
            if res.release_id in charged:
                # a release no step asked for still read its rows: count it at what it reserved
                reads.append(
                    (res, ask or Ask(res.dataset, res.period, res.epsilon, res.delta, "unknown"))
                )
        problems += self._record_totals(reads)
        problems += self._ledger_figures(ledger)
        return problems

    def _record_totals(self, reads: list[tuple[Reservation, Ask]]) -> list[str]:
        """Each record's total (ε, δ), from the releases that read it, within its budget."""
        problems = []
        for dataset in DATASETS:
            budget = self.budgets.get(dataset)
            mine = [(res, ask) for res, ask in reads if res.dataset == dataset]
            if budget is None:
                if mine:
                    problems.append(
                        f"dataset {dataset} has no budget, yet {len(mine)} release(s) drew noise"
                    )
                continue
            over: dict[tuple[float, float, tuple[str, ...]], list[str]] = defaultdict(list)
            for record, (eps, delta, ids) in sorted(self._totals(dataset, mine).items()):
                if _over(eps, budget.epsilon) or _over(delta, budget.delta):
                    over[(eps, delta, tuple(sorted(ids)))].append(record)
            for (eps, delta, ids), records in over.items():
                shown = ", ".join(records[:3]) + (
                    f" and {len(records) - 3} more" * (len(records) > 3)
                )
                problems.append(
                    f"{dataset}: {shown} read by {len(ids)} releases {list(ids)} that spent "
                    f"(ε {eps:g}, δ {delta:g}) in all, over the budget (ε {budget.epsilon:g}, "
                    f"δ {budget.delta:g}{' per period' if budget.per_period else ''})"
                )
            spent = sum(res.epsilon for res, _ in mine)
            if budget.cap is not None and _over(spent, budget.cap):
                problems.append(
                    f"{dataset}: its periods spent ε {spent:g} in all, over the "
                    f"lifetime cap ε {budget.cap:g}"
                )
        return problems

    def _totals(
        self, dataset: str, reads: list[tuple[Reservation, Ask]]
    ) -> dict[str, tuple[float, float, set[str]]]:
        """(ε, δ, release ids) of every record of ``dataset`` read by at least one release; the
        rows of one month are one record here (every release reads all of them or none)."""
        totals: dict[str, tuple[float, float, set[str]]] = {}
        record = self._record() if dataset == PERSONS else {}

        def add(record: str, res: Reservation) -> None:
            eps, delta, ids = totals.get(record, (0.0, 0.0, set()))
            totals[record] = (eps + res.epsilon, delta + res.delta, ids | {res.release_id})

        for res, ask in reads:
            month = self._month_read(res, ask)
            months = self.world.months if month is None else (month,)
            if dataset == TINY:
                add("every row", res)
            elif dataset == MONTHLY:
                for m in months:
                    add(f"each row of {m}", res)
            else:
                for subject in self._subjects_read(months, record if ask.subjects else {}):
                    add(f"subject {subject}", res)
        return totals

    def _month_read(self, res: Reservation, ask: Ask) -> str | None:
        """The month whose rows a release read (None: it could have read every month)."""
        if ask.allowed is not None:
            return month_in_label(res.period, self.now)
        return month_in_label(ask.label, self.now) or month_in_label(res.period, self.now)

    def _subjects_read(self, months: Iterable[str], record: dict[str, str]) -> set[str]:
        """The subjects of ``months`` a release of them read: those the private ``record``
        counts in that month, or in none (the worst case; :meth:`record_problems` checks the
        record itself). A release that counts rows: ``record`` is empty, it read them all."""
        read = set()
        for month in months:
            for subject in self.world.subjects.get(month, ()):
                counted = record.get(subject)
                if counted is None or month_in_label(counted, self.now) == month:
                    read.add(subject)
        return read

    def _record(self) -> dict[str, str]:
        """Subject -> the period the private record counts it in."""
        record = SubjectRecord(self.home, PERSONS)
        if not record.exists():
            return {}
        everyone = set().union(*self.world.subjects.values())
        keyed = {record.key(s): s for s in everyone}
        with sqlite3.connect(f"file:{record.path}?mode=ro", uri=True) as conn:
            rows = conn.execute("SELECT key, period FROM subjects").fetchall()
        return {keyed[bytes(k)]: str(p) for k, p in rows if bytes(k) in keyed}

    def record_problems(self) -> list[str]:
        """The subject record against the ledger: each recorded subject counts in the month of
        the first reservation (ledger order) of a month holding it."""
        ledger = Ledger.open(self.home)
        first: dict[str, str] = {}
        for res in ledger.reservations(PERSONS):
            month = month_in_label(res.period, self.now)
            for subject in self.world.subjects.get(month or "", ()):
                first.setdefault(subject, month or "")
        problems = []
        for subject, period in sorted(self._record().items()):
            if month_in_label(period, self.now) != first.get(subject):
                problems.append(
                    f"persons: subject {subject} counts in {period!r}, but the "
                    f"first release holding it was of {first.get(subject)!r}"
                )
        return problems

    def _ledger_figures(self, ledger: Ledger) -> list[str]:
        """The ledger's own sums (book.py, budget_view.py): spent plus reserved within each
        budget, and the budgets the steps set."""
        problems = []
        for dataset in DATASETS:
            status = ledger.budget(dataset)
            budget = self.budgets.get(dataset)
            if status is None or budget is None:
                if (status is None) != (budget is None):
                    problems.append(
                        f"{dataset}: the ledger's budget {status} is not the one set ({budget})"
                    )
                continue
            set_ = (budget.epsilon, budget.delta, budget.per_period, budget.cap)
            held = (
                status.epsilon_lifetime,
                status.delta_lifetime,
                status.per_period,
                status.lifetime_epsilon,
            )
            if held != set_:
                problems.append(
                    f"{dataset}: the ledger holds the budget {held}, the steps set {set_}"
                )
            scopes = status.periods if status.per_period else (status,)
            for scope in scopes:
                for what, used, limit in (
                    ("ε", scope.epsilon_spent + scope.epsilon_reserved, status.epsilon_lifetime),
                    ("δ", scope.delta_spent + scope.delta_reserved, status.delta_lifetime),
                ):
                    if _over(used, limit):
                        problems.append(
                            f"{dataset} {scope.period or ''}: the ledger says {what} "
                            f"{used:g} spent or reserved of {limit:g}"
                        )
            if status.lifetime_epsilon is not None and _over(
                status.epsilon_spent + status.epsilon_reserved, status.lifetime_epsilon
            ):
                problems.append(f"{dataset}: the ledger says its periods used more than the cap")
            view = BudgetView.load(ledger, dataset)
            for res, spent in view.releases if view else ():
                if spent is not None and _over(spent[0], res.epsilon):
                    problems.append(
                        f"{dataset}: release {res.release_id} spent ε {spent[0]} of "
                        f"the {res.epsilon} it reserved"
                    )
        return problems


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOLERANCE)


def audit_problems(report: dict, ledger: Ledger) -> list[str]:
    """The problems of ``sds audit --verify --json`` but those of releases that are not
    complete in the ledger either (killed, failed or refused after their reservation: their
    directory says so, which is true)."""
    left = []
    for problem in report.get("problems", []):
        found = re.fullmatch(r"[^/]+/([^:]+): status is '[a-z ]+', not 'complete'", problem)
        if found is not None:
            res = ledger.reservation(found[1])
            if res is None or res.status != "completed":
                continue
        left.append(problem)
    return left
