"""Pre-flight checks of a release, before Prefect or GX load (the CLI or the warm runner's child).

In order: whether the budget can pay the release (read-only; nothing is read from the data
before that; a periodic release: its period's budget), when the declared schema bounds every
released column's values the synthesis's sizes (:func:`check_synthesis_sizes`), the input file
(exists, readable, not empty, UTF-8, header, plausible delimiter, regular rows:
:mod:`sds_release.store.inputs.ingest`; a PostgreSQL input: server, table or read-only query,
:mod:`sds_release.store.inputs.postgres`), a periodic release's period (its column present and
filled in every row, the period present: :mod:`sds_release.store.inputs.periods`), the declared
schema (the GX gate's checks evaluated with Arrow: :mod:`sds_release.store.inputs.schema_checks`)
and the column names the parameters mention (with ``executor = "dask"`` only the column names:
the rows are read and checked on the workers by the flow's gate, still before any charge), with
DP quantile bins and a subject id that no subject's rows disagree (:func:`check_subject_join`)
and, with ``privacy_risk``, that the input is large enough for its control rows
(:mod:`sds_release.store.inputs.holdback`). Each problem is the ``SdsInputError`` the flow would
raise later, with the same text, in a fraction of a second, with nothing reserved or charged.
It also finds the "0" cells that SDS would turn into empty cells (:func:`zero_warning`). No
Prefect or GX import here (pandas only to count the subjects of a ``privacy_risk`` release with
a subject id).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sds_core.data.text import match_key, normalize_text
from sds_core.data.zeros import ALL_COLUMNS, zero_shares
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import TABLE_COLUMNS
from sds_release.store.config.core_objects import (
    declared_sizes,
    dp_binned_columns,
    gate_columns,
    prepare_params,
)
from sds_release.store.config.planned import check_synthesis_sizes
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.config.sources import is_local_path
from sds_release.store.inputs.holdback import check_holdback
from sds_release.store.inputs.ingest import input_headers, read_release_input
from sds_release.store.inputs.paths import check_input_path
from sds_release.store.inputs.periods import PeriodFilter
from sds_release.store.inputs.schema_checks import (
    SchemaValidationError,
    failure_message,
    failure_text,
    input_schema,
    schema_checks,
    schema_failures,
    table_check_fails,
    view_columns,
)
from sds_release.store.ledger.units import privacy_unit, unit_refusal
from sds_release.store.ledger.values import (
    BudgetExceededError,
    PeriodMismatchError,
    PolicyExceededError,
    UnitMismatchError,
    period_refusal,
)
from sds_release.store.workspace.encoding import HALF_WIDTH_COLUMN

__all__ = [
    "Preflight",
    "check_budget",
    "check_column_names",
    "check_subject_join",
    "preflight",
    "subject_conflict",
    "zero_warning",
]

_TOLERANCE = 1e-9  # relative; the ledger's exact (Decimal) check at reservation is the authority


@dataclass(frozen=True)
class Preflight:
    """What the pre-flight found besides errors.

    Attributes:
        zero_shares: per column, the share of rows holding "0" that SDS will treat as empty
            (columns not in ``sensitive_zeros``). Computed from the sensitive data: show it to
            the custodian (the CLI's warning), never publish or log it exactly.
    """

    zero_shares: Mapping[str, float] = field(default_factory=dict)


def preflight(params: ReleaseParams) -> Preflight:
    """Every check that needs neither Prefect nor GX; raises the first problem found.

    ``params.home`` must be resolved and ``params.release_id`` set (the CLI does both).

    Raises:
        SdsInputError: the budget cannot pay, the file is unusable, the table breaks its
            declared schema, or a parameter names a column the input does not have.
    """
    source = params.input  # a PostgreSQL URL or s3:// objects: read (so checked) below
    path = check_input_path(source) if is_local_path(source) else source
    check_budget(params)
    declared = declared_sizes(params)
    if declared is not None:  # the schema bounds every column: the synthesis is sized now
        check_synthesis_sizes(params, *declared)
    gate = gate_columns(params)
    if params.executor == "dask":  # never a PostgreSQL input (ReleaseParams refuses it)
        _check_headers(params, input_headers(path, delimiter=params.delimiter), gate)
        return Preflight()
    table, _ = read_release_input(
        path,
        delimiter=params.delimiter,
        gate_columns=gate,
        period=PeriodFilter.of(params.period_column, params.period, params.period_format),
        table=params.table,
        query=params.query,
    )
    schema = input_schema(params.table_schema, gate)
    if schema is not None:
        failures = schema_failures(table, schema)
        if failures:
            raise SchemaValidationError(failure_message("input", failures, None))
    check_column_names(params, table.column_names)
    check_subject_join(params, table)
    if params.privacy_risk:  # enough rows (subjects) for the control rows held back
        check_holdback(table, params.subject_id)
    shares = zero_shares(
        table,
        use_columns=params.use_columns,
        sensitive_zeros=params.sensitive_zeros,
        record_limit=params.record_limit,
    )
    return Preflight(zero_shares=shares)


def _check_headers(params: ReleaseParams, headers: list[str], gate: list[str]) -> None:
    """The executor "dask" pre-flight: the input is read on the workers, so here only its
    column names are checked (the declared column set, the parameters' column names); the
    flow's gate checks every row on the workers, still before anything is charged."""
    if gate:
        headers = [h for h in headers if h in set(gate)]
    schema = input_schema(params.table_schema, gate)
    if schema is not None:
        failures = [
            failure_text(check, headers, schema, None)
            for check in schema_checks(schema, headers)
            if check.kind == "expect_table_columns_to_match_set"
            and table_check_fails(check, view_columns(headers, schema), 0)
        ]
        if failures:
            raise SchemaValidationError(failure_message("input", failures, None))
    check_column_names(params, headers)


def check_budget(params: ReleaseParams) -> None:
    """Refuse, before the data is read, a release the dataset's budget cannot pay (a periodic
    release: its period's budget, within the lifetime cap across periods).

    Reads the release's ledger (``params.ledger``, else $SDS_LEDGER_URL, else the home's SQLite
    file; SQLite or PostgreSQL) and writes nothing to it: nothing is reserved (the flow's budget
    stage reserves atomically and stays the authority). A home without a ledger file is not
    given one here. A release id that already holds a reservation (a resumed release) passes.

    Raises:
        BudgetExceededError: no budget for the dataset, or less left than the release needs;
            the texts are those of :meth:`sds_release.store.ledger.book.Ledger.reserve`.
        PolicyExceededError: the release asks for more than the dataset's per-release policy.
        PeriodMismatchError: ``--period`` on a dataset with a lifetime budget, or none on a
            dataset whose budget is per period.
        UnitMismatchError: the dataset's releases count another record (rows, or subjects of
            another column: :mod:`sds_release.store.ledger.units`).
        LedgerMovedError: the ledger was migrated (``sds ledger migrate``), as reserving would.
        SdsInputError: the ledger URL is not supported or the ledger cannot be opened.
    """
    from sds_release.store.ledger.backends import redact_url, resolve_ledger_url, sqlite_path
    from sds_release.store.ledger.book import Ledger, LedgerMovedError

    dataset, release_id = str(params.dataset), params.release_id or "new"
    unit = privacy_unit(params.subject_id)
    url = resolve_ledger_url(Path(params.home or "."), params.ledger)
    path = sqlite_path(url)
    status = None
    if path is None or path.is_file():  # a missing SQLite file: a new home, no budget yet
        ledger = Ledger.from_url(url)
        moved = ledger.moved_to()
        if moved is not None:
            raise LedgerMovedError(
                f"the ledger {redact_url(url)} was migrated to {moved} and is read-only: "
                f"use --ledger {moved} (or SDS_LEDGER_URL) for every command"
            )
        if params.release_id and ledger.reservation(params.release_id) is not None:
            return
        status = ledger.budget(dataset)
        kept = ledger.privacy_unit(dataset)
        refusal = None if kept is None else unit_refusal(dataset, unit, *kept)
        if refusal is not None:
            raise UnitMismatchError(refusal)
    if status is not None:
        mismatch = period_refusal(
            dataset, status.per_period, params.period, status.epsilon_lifetime
        )
        if mismatch is not None:
            raise PeriodMismatchError(mismatch)
        if status.per_period and params.period is not None:
            status = status.period_status(params.period)
    where = f"dataset {dataset!r}"
    if status is not None:
        left = (status.epsilon_remaining, status.delta_remaining)
        lifetime = (status.epsilon_lifetime, status.delta_lifetime)
        if status.per_period:
            where = f"period {params.period!r} of dataset {dataset!r}"
    elif params.default_budget is not None and params.period is None:
        left = lifetime = (params.default_budget.epsilon, params.default_budget.delta)
    else:
        each = " --per-period" if params.period is not None else ""
        raise BudgetExceededError(
            f"dataset {dataset!r} has no privacy budget; set one with "
            f"`sds budget set {dataset} --epsilon E --delta D{each}`"
        )
    need = (params.epsilon, params.resolved_delta())
    refusal = (
        None
        if status is None or status.policy is None
        else status.policy.refusal(dataset, release_id, *need)
    )
    if refusal is not None:
        raise PolicyExceededError(refusal)
    cap_left = None if status is None else status.epsilon_cap_remaining
    if cap_left is not None and status is not None and status.lifetime_epsilon is not None:
        period_left = status.epsilon_lifetime - status.epsilon_spent - status.epsilon_reserved
        if need[0] > cap_left * (1 + _TOLERANCE) + 1e-15 and need[0] <= period_left:
            raise BudgetExceededError(
                f"release {release_id!r} of period {params.period!r} needs "
                f"epsilon={float(need[0])} but dataset {dataset!r} has only "
                f"epsilon={float(cap_left)} left of its lifetime cap across periods "
                f"(epsilon={float(status.lifetime_epsilon)}); release with a smaller --epsilon "
                f"or raise the cap with `sds budget set {dataset} --epsilon E --per-period "
                "--lifetime-epsilon L`"
            )
    over = [n > lft * (1 + _TOLERANCE) + 1e-15 for n, lft in zip(need, left, strict=True)]
    if any(over):
        short = " and ".join(name for name, o in zip(("epsilon", "delta"), over, strict=True) if o)
        raise BudgetExceededError(
            f"release {release_id!r} needs (epsilon={float(need[0])}, "
            f"delta={float(need[1])}) but {where} has only "
            f"(epsilon={float(left[0])}, delta={float(left[1])}) left of its "
            f"{'per-period budget' if status is not None and status.per_period else 'lifetime'} "
            f"(epsilon={float(lifetime[0])}, delta={float(lifetime[1])}): not enough {short}; "
            "release with a smaller --epsilon/--delta or raise the budget with "
            f"`sds budget set {dataset} --epsilon E --delta D"
            f"{' --per-period' if status is not None and status.per_period else ''}`"
        )


def check_column_names(params: ReleaseParams, headers: list[str]) -> None:
    """Every column ``use_columns``, ``sensitive_zeros`` and ``subject_id`` name exists
    (case-insensitive).

    A ``sensitive_zeros`` entry outside ``use_columns`` is not checked: preparation ignores it
    (a config may list zeros for more columns than one release uses).

    Raises:
        SdsInputError: naming the parameter, the unknown column and the input's columns; or
            a released column named like one of aggregates.parquet's own columns.
    """
    released = params.use_columns or [
        h for h in headers if not params.subject_id or match_key(h) != match_key(params.subject_id)
    ]
    own = (*TABLE_COLUMNS, HALF_WIDTH_COLUMN)
    clash = [c for c in released if normalize_text(c) in own]
    if clash:
        raise SdsInputError(
            f"input column(s) {clash} have the names of aggregates.parquet's own columns "
            f"{list(own)}, next to which every released column gets a column of its "
            "values: rename them in the input's header, or leave them out with use_columns"
        )
    keys = {match_key(h) for h in headers}
    for option, names in (
        ("use_columns", params.use_columns),
        ("sensitive_zeros", params.sensitive_zeros),
        ("subject_id", [params.subject_id] if params.subject_id else []),
    ):
        for name in names:
            if option == "sensitive_zeros" and (
                match_key(name) == ALL_COLUMNS
                or (params.use_columns and name not in params.use_columns)
            ):
                continue  # "all", or a column left out of the release (preparation skips it)
            if match_key(name) not in keys:
                flag = "--" + option.replace("_", "-")
                raise SdsInputError(
                    f"parameter '{option}' names column {name!r}, which the input does not "
                    f"have (its columns: {headers}); fix {flag} or {option} in the config"
                )


def check_subject_join(params: ReleaseParams, table: Any) -> None:
    """With a subject id and DP quantile bins, refuse before the ``binning`` charge what the
    subject join would refuse after it: rows of one subject that disagree on a single-value
    column (a DP-binned column: on its value as written, as its bins are not drawn yet).
    Without DP bins the join itself runs before any charge (the ``prepare`` stage), so nothing
    is checked here.

    Raises:
        SdsInputError: naming the columns and the fix; nothing was charged.
    """
    from sds_core.data.preparation import subject_values

    if params.subject_id is None or not dp_binned_columns(params):
        return
    core = prepare_params(params, None, table.column_names, before_dp_bins=True)
    conflicts = subject_values(table, core).conflicts()
    if conflicts:
        raise subject_conflict(params, conflicts)


def subject_conflict(params: ReleaseParams, columns: list[str]) -> SdsInputError:
    """The refusal of subject rows that disagree on ``columns`` (before any charge)."""
    binned = {c.name for c in dp_binned_columns(params)}
    dp = [c for c in columns if c in binned]
    numbers = (
        f"; in {', '.join(dp)} (DP quantile bins) they must hold the same value, even two "
        "numbers of one bin, as the bins are drawn from the data after this check"
        if dp
        else ""
    )
    return SdsInputError(
        f"with subject_id {params.subject_id!r} the rows of a subject are joined into one "
        f"record, which holds one value per column, but some subject's rows hold different "
        f"values in column(s) {', '.join(columns)}{numbers}. Make each subject's rows agree "
        "in these columns, or leave them out with use_columns. Nothing was charged."
    )


def _share_text(share: float) -> str:
    return "under 1%" if share < 0.005 else f"{share:.0%}"


def zero_warning(shares: Mapping[str, float]) -> str:
    """The one warning about "0" cells SDS will treat as empty: columns, shares and the fix.

    Its shares are counted from the data (not DP): for the custodian's terminal and the private
    custodian report only, never the run's log or a published file.

    >>> zero_warning({"sex": 0.48, "married": 0.004})
    'columns sex (48% of rows), married (under 1% of rows) hold "0", which SDS treats as an empty cell: those zeros will not appear in the release. To keep "0" as a value, pass --sensitive-zeros sex,married (or --sensitive-zeros all) or list them in sensitive_zeros in the config.'
    """  # noqa: E501
    listed = ", ".join(f"{name} ({_share_text(share)} of rows)" for name, share in shares.items())
    names = ",".join(shares)
    subject = f"columns {listed} hold" if len(shares) > 1 else f"column {listed} holds"
    them = "them" if len(shares) > 1 else "it"
    return (
        f'{subject} "0", which SDS treats as an empty cell: those zeros will not appear in '
        f'the release. To keep "0" as a value, pass --sensitive-zeros {names} (or '
        f"--sensitive-zeros all) or list {them} in sensitive_zeros in the config."
    )
