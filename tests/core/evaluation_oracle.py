"""The reference the release evaluation is tested against: the whole tables' exact aggregates
compared with :mod:`sds_core.evaluation.metrics` (what ``evaluate_release`` computed before it
counted the records one length at a time where they are). Tests only: the product has one
evaluation, :func:`sds_core.evaluation.release.evaluate_release`."""

from __future__ import annotations

from typing import Any

from sds_core.data.table import PreparedTable
from sds_core.evaluation.metrics import (
    NOT_DP_NOTE,
    aggregate_metrics,
    marginal_fidelity,
    risk_metrics,
)
from sds_core.evaluation.params import EvaluationParams
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.exact_counts import exact_aggregates


def whole_table_evaluation(
    original: PreparedTable,
    synthetic: PreparedTable,
    dp_aggregates: AggregateSet,
    params: EvaluationParams = EvaluationParams(),
) -> dict[str, Any]:
    """The release evaluation of two whole tables from their whole exact aggregates."""
    R, k = params.reporting_length, params.resolution
    sensitive = exact_aggregates(original, R)
    synth = exact_aggregates(synthetic, R)
    order = params.max_marginal_order
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "params": {"reporting_length": R, "resolution": k, "max_marginal_order": order},
        "sensitive_vs_dp_aggregates": aggregate_metrics(
            sensitive,
            dp_aggregates,
            resolution=k,
            n_sensitive=original.n_records,
            n_target=dp_aggregates.protected_number_of_records,
        ),
        "sensitive_vs_synthetic": aggregate_metrics(
            sensitive,
            synth,
            resolution=k,
            n_sensitive=original.n_records,
            n_target=synthetic.n_records,
        ),
        "sensitive_risk": risk_metrics(sensitive, original, resolution=k),
        "synthetic_risk": risk_metrics(synth, synthetic, resolution=k),
        "marginal_fidelity": marginal_fidelity(original, synthetic, max_order=order),
    }
