"""What a release may claim about its privacy: where its δ goes, and whether it is private at all.

The manifest's privacy section (:func:`privacy_claims`), the ledger's ``aggregate-1`` charge
(:func:`delta_detail`), the report's and explorer's first line and the CLI's warning
(:data:`SEEDED_WARNING`) all read these, so a seeded release says the same thing everywhere.
"""

from __future__ import annotations

from typing import Any

from sds_release.store.config.core_objects import dp_params
from sds_release.store.config.release_params import ReleaseParams

__all__ = ["SEEDED_WARNING", "delta_detail", "not_private_reason", "privacy_claims"]

SEEDED_WARNING = (
    "NOT PRIVATE: this release was made with a fixed seed, so its noise can be regenerated "
    "from the seed (a small seed can be found by trying seeds against the published values) "
    "and subtracted. Use seed for tests and benchmarks only; never publish such a release."
)
"""The one sentence that marks a seeded release (CLI, manifest, report, explorer)."""


def not_private_reason(params: ReleaseParams) -> str | None:
    """:data:`SEEDED_WARNING` when the release key comes from ``seed``, else None."""
    return SEEDED_WARNING if params.seed is not None else None


def delta_detail(params: ReleaseParams, n_columns: int) -> dict[str, Any] | None:
    """Where an aggregate-seeded release's δ goes, from public values only (None for a
    registry synthesizer, whose plan carries its own δ).

    ``{"effective_delta": ..., "delta_parts": {"zcdp", "one_tuple_threshold",
    "noise_sampler"}}``: see :func:`sds_core.marginals.privacy_report.delta_parts`; the
    effective δ never exceeds the δ the ledger charges.

    Raises:
        SdsInputError: the noise samplers' bound does not fit in δ/2.
    """
    if not params.aggregate_seeded:
        return None
    from sds_core.marginals.engine import plan_release, release_delta_parts

    dp = dp_params(params)
    parts = release_delta_parts(dp, plan_release(dp, 1), n_columns)  # δ explicit: no count
    return {"effective_delta": parts.total, "delta_parts": parts.to_dict()}


def privacy_claims(params: ReleaseParams, n_columns: int) -> dict[str, Any]:
    """The manifest's privacy fields beyond ε, δ and the charges: ``private`` (False for a
    seeded release, with ``not_private`` saying why) and, for aggregate-seeded releases,
    ``effective_delta`` and ``delta_parts`` (:func:`delta_detail`)."""
    reason = not_private_reason(params)
    out: dict[str, Any] = {"private": reason is None}
    if reason is not None:
        out["not_private"] = reason
    return out | (delta_detail(params, n_columns) or {})
