"""EvaluationParams: the settings of a release's evaluation (no privacy meaning).

A module of its own, without the evaluation's compiled kernels, so that the release parameters
(sds_release.store.config) declare their evaluation keys from it without loading numba;
:mod:`sds_core.evaluation.metrics` uses it (and re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass

from sds_core.param_fields import check_fields, documented, param

__all__ = ["EvaluationParams"]

_NOT_DP = (
    "Not DP: evaluation reads the sensitive data; it stays in the private custodian report, "
    "never in the release."
)


@documented
@dataclass(frozen=True, slots=True)
class EvaluationParams:
    """Evaluation settings (no privacy meaning: evaluation is never published as DP).

    Every field is declared once below (default, bounds, meaning).
    """

    reporting_length: int = param(
        3,
        kind=int,
        ge=1,
        doc="Longest combination length compared (a release compares up to its R).",
        privacy=_NOT_DP,
    )
    resolution: int = param(
        10,
        kind=int,
        ge=1,
        le=10_000,
        doc="k of the rare-combination and preservation metrics: counts are compared in bins "
        "of k records (SDS default 10; at most 10000: above, almost every combination is rare "
        "and the metrics only cost memory).",
        privacy=_NOT_DP,
    )
    max_marginal_order: int = param(
        3,
        kind=int,
        ge=1,
        doc="Longest marginal (number of columns) in the TVD workload.",
        privacy=_NOT_DP,
    )

    def __post_init__(self) -> None:
        check_fields(self)
