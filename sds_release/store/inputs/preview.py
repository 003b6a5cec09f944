"""The preview ``sds plan`` prints: what a release would publish and cost, before anything is spent.

Reads the input's header (or the declared schema) and public parameters, never a data row, and
charges nothing: per length, the noise figures of :func:`sds_core.marginals.forecast.forecast`
(the functions a real release's noise description uses); the record count N the preview assumes
and where it comes from; the ε that meets a target interval (``--target-ci``); the reporting
length, split and synthesis the SDS plan (the release's ``plan`` stage) would choose for N
(:mod:`sds_release.store.config.planned`: a real release chooses them from its DP record count); and
the dataset's budget with how many releases of this ε it still pays for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sds_core.data.text import match_key
from sds_core.errors import SdsInputError
from sds_release.store.config.core_objects import dp_params, synthesis_epsilon
from sds_release.store.config.planned import planned_params
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.inputs.ingest import input_headers
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.values import BudgetStatus
from sds_release.store.workspace.home import MANIFEST

if TYPE_CHECKING:
    from sds_core.marginals.plan import SdsPlan

__all__ = ["ReleasePreview", "make_preview"]


@dataclass(frozen=True, slots=True)
class ReleasePreview:
    """The preview: everything ``sds plan`` prints (``to_dict`` is its ``--json``)."""

    dataset: str
    columns: tuple[str, ...]
    columns_from: str
    records: int | None
    records_from: str
    epsilon: float
    delta: float
    target_ci: float | None
    forecast: Any  # sds_core.marginals.forecast.ReleaseForecast
    budget: BudgetStatus | None
    releases_left: int | None
    sds_plan: SdsPlan | None = None  # what the SDS plan would choose for N

    @property
    def too_small(self) -> bool:
        """The length-1 threshold is at least N: even a value every record holds would more
        likely than not be suppressed, so a release would most likely be charged and end with
        no count to publish (docs/using.md, "Too small to release")."""
        first = self.forecast.lengths[0] if self.forecast.lengths else None
        return (
            self.records is not None
            and first is not None
            and first.threshold is not None
            and first.threshold >= self.records
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for --json)."""
        return {
            "dataset": self.dataset,
            "columns": list(self.columns),
            "columns_from": self.columns_from,
            "records": self.records,
            "records_from": self.records_from,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "target_ci": self.target_ci,
            "forecast": self.forecast.to_dict(),
            "budget": None if self.budget is None else self.budget.to_dict(),
            "releases_left": self.releases_left,
            "sds_plan": None if self.sds_plan is None else self.sds_plan.as_dict(),
            "too_small": self.too_small,
            "charged": False,
        }


def make_preview(
    params: ReleaseParams,
    *,
    records: int | None = None,
    target_ci: float | None = None,
) -> ReleasePreview:
    """The preview of the release ``params`` describes; reads the header and the ledger only.

    Args:
        params: the release's parameters (``home`` resolved).
        records: the record count N to assume (``--records``); else the DP record count of the
            dataset's last complete release in this home, else the schema's ``max_rows``.
        target_ci: solve ε for a length-1 95% half-width of at most this (``--target-ci``);
            the preview then shows that ε's figures.

    Raises:
        SdsInputError: no header and no schema, a column named in the parameters missing from
            the header, or a ``target_ci`` no ε ≤ 100 meets.
    """
    from sds_core.marginals.forecast import forecast, solve_epsilon

    columns, columns_from = _columns(params)
    if records is not None and records < 1:
        raise SdsInputError(f"--records must be a whole number >= 1, got {records}")
    n, n_from = _records(params, records)
    chosen = None
    if n is not None and n >= 1:  # the R, split and synthesis a release of N records would get
        params, chosen = planned_params(params, n, len(columns))
    if target_ci is not None:
        dp = dp_params(params)
        eps_marginals = solve_epsilon(dp, len(columns), target_ci)
        # the release's ε also pays the DP bins, if any: scale back to the whole release
        share = synthesis_epsilon(params) / params.epsilon
        params = params.model_copy(update={"epsilon": eps_marginals / share})
    predicted = forecast(dp_params(params), len(columns))
    budget = _budget(params)
    return ReleasePreview(
        dataset=str(params.dataset),
        columns=tuple(columns),
        columns_from=columns_from,
        records=n,
        records_from=n_from,
        epsilon=params.epsilon,
        delta=params.resolved_delta(),
        target_ci=target_ci,
        forecast=predicted,
        budget=budget,
        releases_left=None
        if budget is None
        else budget.releases_left(params.epsilon, params.resolved_delta()),
        sds_plan=chosen,
    )


def _columns(params: ReleaseParams) -> tuple[list[str], str]:
    """The released columns: ``use_columns``, else the header (minus the subject id), else the
    declared schema's columns; and where they came from."""
    if params.use_columns:
        return list(params.use_columns), "use_columns"
    hidden = {match_key(c) for c in (params.subject_id, params.period_column) if c}
    if Path(params.input).exists():
        names = input_headers(params.input, delimiter=params.delimiter)
        source = "the input's header (no data row read)"
    elif params.table_schema is not None:
        names = [c.name for c in params.table_schema.columns]
        source = "the declared schema (the input is not readable here)"
    else:
        raise SdsInputError(
            f"input {params.input!r} does not exist and the config declares no schema: give "
            "the path of the input (only its header is read) or a config with [schema]"
        )
    return [c for c in names if match_key(c) not in hidden], source


def _records(params: ReleaseParams, given: int | None) -> tuple[int | None, str]:
    """N and where it comes from (the output says which)."""
    if given is not None:
        return given, "--records"
    last = _last_dp_count(Path(str(params.home)), str(params.dataset))
    if last is not None:
        return last[0], f"the DP record count of release {last[1]}"
    schema = params.table_schema
    if schema is not None and schema.max_rows is not None:
        return schema.max_rows, "the schema's max_rows"
    return None, "unknown (give --records N)"


def _last_dp_count(home: Path, dataset: str) -> tuple[int, str] | None:
    """The DP record count (``input.rows``) of the dataset's newest complete release here."""
    best: tuple[str, int, str] | None = None
    for manifest in (home / "releases" / dataset).glob(f"*/{MANIFEST}"):
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        if data.get("status") != "complete" or not isinstance(data.get("input"), dict):
            continue
        rows = data["input"].get("rows")
        when = str(data.get("finished_at") or data.get("created_at") or "")
        if isinstance(rows, int) and (best is None or when > best[0]):
            best = (when, rows, manifest.parent.name)
    return None if best is None else (best[1], best[2])


def _budget(params: ReleaseParams) -> BudgetStatus | None:
    """The dataset's budget, read-only (a home without a ledger file has none)."""
    from sds_release.store.ledger.backends import resolve_ledger_url, sqlite_path

    url = resolve_ledger_url(Path(str(params.home)), params.ledger)
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        return None
    return Ledger.from_url(url).budget(str(params.dataset), params.period)
