"""What the release report and explorer are built from: published values only, gathered once.

The manifest (privacy spend, DP record count), its noise description (or, when the manifest has
none, the same values from the budget plan and the aggregate-k checkpoints), and the agreement
of the DP aggregates with the synthetic records, summarised as the published
``evaluation.json``. Nothing here reads the sensitive data. Also the ledger's budget of the
dataset around the release (:func:`budget_snapshot`), which only the private custodian report
shows. Called by :mod:`sds_release.store.publish.artifacts`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sds_core.data.table import PreparedTable
from sds_core.errors import SdsInternalError
from sds_core.evaluation.agreement import (
    Agreement,
    agreement,
    agreement_summary,
    column_warnings,
)
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.backend import CountingBackend
from sds_release.store.config.fields import AGGREGATE_SEEDED
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.ledger.book import Ledger
from sds_release.store.run.release_run import ReleaseRun, noise_scales
from sds_release.store.run.results import LengthNoise, LengthResult
from sds_release.store.run.stages import aggregate_stage


def count_sd(entry: dict[str, Any]) -> float:
    """Standard deviation of the noise on one published count of a ``by_length`` entry.

    ``noise_sd`` when the manifest gives it, else ``sigma * sqrt(allowed_sensitivity)``.

    >>> count_sd({"sigma": 2.0, "allowed_sensitivity": 4})
    4.0
    >>> count_sd({"sigma": 2.0, "allowed_sensitivity": 4, "noise_sd": 4.5})
    4.5
    """
    if entry.get("noise_sd") is not None:
        return float(entry["noise_sd"])
    return float(entry["sigma"]) * math.sqrt(max(int(entry["allowed_sensitivity"]), 0))


def laplace_half_width(scale: float) -> float:
    """Half-width of the 95% interval of Laplace noise of ``scale`` (P(|X| > t) = e^(-t/b)).

    >>> round(laplace_half_width(50.0), 1)
    149.8
    """
    return scale * math.log(20.0)


def recorded_noise(run: ReleaseRun) -> dict[str, Any]:
    """``manifest["privacy"]["noise"]`` rebuilt from the release's aggregate-k checkpoints.

    The same description the flow publishes
    (:func:`sds_release.store.run.release_run.noise_scales`), for a caller that did not carry the
    aggregate-k results to publish: Δ_k and the thresholds are the stages' DP outputs, σ_k and the
    record count's scale come from the budget plan.
    """
    lengths: dict[int, LengthNoise] = {}
    if run.params.aggregate_seeded:
        for k in range(1, run.params.length + 1):
            step = run.dirs.load_checkpoint(aggregate_stage(k))
            if step is None:
                raise SdsInternalError(f"publishing before stage {aggregate_stage(k)} finished")
            lengths[k] = LengthResult.from_checkpoint(step).noise
    return noise_scales(run.params, lengths)


@dataclass(frozen=True, slots=True)
class BudgetSnapshot:
    """The dataset's (ε, δ) budget when the release was published (from the ledger)."""

    epsilon_lifetime: float
    delta_lifetime: float
    epsilon_before: float
    delta_before: float
    epsilon_release: float
    delta_release: float
    epsilon_after: float
    delta_after: float
    epsilon_reserved_elsewhere: float
    period: str | None = None  # a periodic release: the budget is this period's (per period)

    @property
    def epsilon_spent_before(self) -> float:
        """ε spent by earlier releases (and held by others), i.e. lifetime - before."""
        return max(self.epsilon_lifetime - self.epsilon_before, 0.0)


def budget_snapshot(run: ReleaseRun) -> BudgetSnapshot | None:
    """The budget of the release's dataset, now that every stage of the release is charged.

    "After" is what the ledger has left now; "before" adds back this release's (ε, δ). None
    when the dataset has no budget, and for a replay (``sds audit --replay``), whose ledger
    holds only the release's charges. Not published: "before" shows what the dataset's other
    releases spent (the private custodian report shows it).
    """
    ledger = run.ledger()
    if not isinstance(ledger, Ledger):
        return None
    status = ledger.budget(run.dataset, run.params.period)
    if status is None:
        return None
    return BudgetSnapshot(
        epsilon_lifetime=status.epsilon_lifetime,
        delta_lifetime=status.delta_lifetime,
        epsilon_before=status.epsilon_remaining + run.epsilon,
        delta_before=status.delta_remaining + run.delta,
        epsilon_release=run.epsilon,
        delta_release=run.delta,
        epsilon_after=status.epsilon_remaining,
        delta_after=status.delta_remaining,
        epsilon_reserved_elsewhere=status.epsilon_reserved,
        period=status.period,
    )


@dataclass(frozen=True, eq=False)
class ReportInputs:
    """Everything the report and the explorer show; all of it published or DP.

    Attributes:
        manifest: the release manifest (artifacts listed so far, privacy with ``noise``).
        evaluation: the published evaluation, ``evaluation.json``'s metrics
            (:func:`sds_core.evaluation.agreement.agreement_summary` of ``agreement``).
        agreement: DP aggregates vs synthetic records, per combination.
        synthetic_records: number of synthetic records published.
    """

    manifest: dict[str, Any]
    evaluation: dict[str, Any]
    agreement: Agreement
    synthetic_records: int

    @property
    def noise(self) -> dict[str, Any]:
        """``manifest["privacy"]["noise"]`` (record_count, by_length, how_to_read)."""
        noise = self.manifest.get("privacy", {}).get("noise")
        return noise if isinstance(noise, dict) else {"record_count": None, "by_length": []}

    def sd_by_len(self) -> dict[int, float]:
        """Noise standard deviation of one published count, per length (SDS releases only)."""
        return sd_by_len(self.manifest)


def gather(
    run: ReleaseRun,
    manifest: dict[str, Any],
    aggregates: AggregateSet,
    synthetic: PreparedTable | CountingBackend,
) -> ReportInputs:
    """Collect the report inputs; records them in ``manifest`` where it has none yet.

    Adds ``privacy.noise`` when missing. The evaluation is the agreement's summary, computed
    from the published values only.
    """
    if "noise" not in manifest["privacy"]:  # rebuilt only when missing: it reads aggregate-R
        manifest["privacy"]["noise"] = recorded_noise(run)
    compared = agreement(aggregates, synthetic)
    sd = sd_by_len(manifest)
    warnings = column_warnings(
        compared,
        sd,
        protected_records=int((manifest.get("input") or {}).get("rows") or 0) or None,
        synthetic_records=synthetic.n_records,
        better=better_option(run.params),
    )
    return ReportInputs(
        manifest=manifest,
        evaluation=agreement_summary(compared, sd) | {"warnings": warnings},
        agreement=compared,
        synthetic_records=synthetic.n_records,
    )


def better_option(params: ReleaseParams) -> str:
    """What would follow the DP 1-way counts more closely than this release's synthesis."""
    if not params.aggregate_seeded:
        return (
            f'synthesizer = "{AGGREGATE_SEEDED}" draws records matched to the DP counts of its '
            "own aggregates"
        )
    if params.synthesis == "records" and not params.reconcile_one_way:
        return (
            'synthesis = "model" (or reconcile_one_way = true) gives records that follow the '
            "DP counts"
        )
    return "a larger epsilon or fewer columns (use_columns) make the DP counts less noisy"


def sd_by_len(manifest: dict[str, Any]) -> dict[int, float]:
    """Noise standard deviation of one published count per length (``privacy.noise``; empty
    for a registry synthesizer).

    >>> sd_by_len({"privacy": {"noise": {"by_length": [{"length": 1, "noise_sd": 2.5}]}}})
    {1: 2.5}
    """
    noise = (manifest.get("privacy") or {}).get("noise") or {}
    return {int(e["length"]): count_sd(e) for e in noise.get("by_length") or []}
