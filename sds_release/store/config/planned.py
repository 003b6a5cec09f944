"""The SDS plan of a running release: its reporting length, split and synthesis, chosen from the
DP record count (``plan`` stage, between ``count`` and ``aggregate-1``).

:func:`sds_core.marginals.plan.plan_sds` reads only the DP record count N̂, the release's public
(ε, δ) and the number of columns, so the choice is post-processing of a DP output and costs no
budget (docs/privacy.md). Values the user set (``reporting_length``, ``synthesis``,
``sigma_proportions``) are kept; with both ``reporting_length`` and ``synthesis`` set nothing is
chosen and the release runs as configured. The release's parameters become the planned ones
(:func:`planned_params`), and the ledger's per-stage plan follows within the reserved total.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sds_core.errors import SdsInputError
from sds_core.marginals.params import AccuracyMode, DpParams
from sds_release.store.config.core_objects import dp_params
from sds_release.store.config.release_params import ReleaseParams

if TYPE_CHECKING:
    from sds_core.marginals.plan import SdsPlan

__all__ = [
    "PLANNED_FIELDS",
    "after_aggregation",
    "check_synthesis_sizes",
    "may_build_records",
    "may_draw_model",
    "planned_params",
]

PLANNED_FIELDS = ("reporting_length", "sigma_proportions", "synthesis", "reconcile_one_way")
"""The ReleaseParams fields the SDS plan sets: the first three when the configuration left them
empty; ``reconcile_one_way`` is turned on with the records the plan chooses (pin
``synthesis = "records"`` to keep unreconciled records)."""


def planned_params(
    params: ReleaseParams, protected_n: int, n_columns: int
) -> tuple[ReleaseParams, SdsPlan | None]:
    """The parameters the release runs with after the plan, and the plan (for the manifest:
    its :meth:`~sds_core.marginals.plan.SdsPlan.as_dict`).

    A registry synthesizer has no SDS plan: ``(params, None)``.
    """
    from sds_core.marginals.plan import plan_sds

    if not params.aggregate_seeded:
        return params, None
    pinned = params.reporting_length is not None and params.synthesis is not None
    split = params.sigma_proportions
    mode: AccuracyMode | None = None
    if split:
        mode = AccuracyMode.custom(split)
    elif pinned:
        mode = DpParams().accuracy_mode  # a configuration that pins R and synthesis: as today
    dp = dp_params(params)
    plan = plan_sds(
        protected_n,
        epsilon=dp.epsilon,
        delta=float(params.resolved_delta()),
        n_columns=n_columns,
        number_of_records_epsilon_proportion=params.number_of_records_epsilon_proportion,
        reporting_length=params.reporting_length,
        accuracy_mode=mode,
        # reconcile_one_way adjusts records: the plan keeps records for it
        synthesis=params.synthesis or ("records" if params.reconcile_one_way else None),
    )
    r = plan.reporting_length
    default = DpParams(reporting_length=r).accuracy_mode.proportions(r)
    custom = None if tuple(plan.sigma_proportions) == default else list(plan.sigma_proportions)
    planned = params.model_copy(
        update={
            "reporting_length": r,
            "synthesis": plan.synthesis,
            "sigma_proportions": split if split else custom,
            "reconcile_one_way": params.reconcile_one_way or plan.reconcile_one_way,
        }
    )
    return ReleaseParams.model_validate(planned.model_dump()), plan


def after_aggregation(
    params: ReleaseParams, plan: SdsPlan | None, aggregates: Any
) -> tuple[ReleaseParams, SdsPlan | None]:
    """The plan once the DP aggregates are known (:meth:`SdsPlan.after_aggregation`): records
    chosen by the plan at R >= 3 become the consistent model when the published longest
    combinations hold far more than the records can. Post-processing of DP aggregates."""
    if plan is None:
        return params, None
    after = plan.after_aggregation(aggregates)
    if after.synthesis == params.synthesis:
        return params, plan
    # the plan's own reconciliation goes with its records (a user's keeps records: no switch)
    update = {"synthesis": after.synthesis, "reconcile_one_way": after.reconcile_one_way}
    return params.model_copy(update=update), after


def may_build_records(params: ReleaseParams) -> bool:
    """Whether the release may build its records from the aggregates (aggregate-seeded
    synthesis): unless the configuration pins the model."""
    return params.aggregate_seeded and params.synthesis != "model"


def may_draw_model(params: ReleaseParams) -> bool:
    """Whether the release may draw its records from the consistent model: pinned by the
    configuration, or left to the SDS plan (which keeps records for ``reconcile_one_way``)."""
    if not params.aggregate_seeded:
        return False
    if params.synthesis is not None:
        return params.synthesis == "model"
    return not params.reconcile_one_way


def check_synthesis_sizes(
    params: ReleaseParams, columns: Sequence[str], cardinalities: Sequence[int]
) -> None:
    """Refuse, before the first charge, a release whose synthesis could exceed its size limits,
    for whatever the SDS plan may choose: the records at the longest reporting length it may
    pick (:func:`~sds_core.synthesis.generator.check_synthesis_size`) and, when it may draw
    them from the consistent model, the model's worst case
    (:func:`~sds_core.synthesis.consistent.worst_case_model_bytes`).

    ``columns`` and ``cardinalities``: the released columns and an upper bound on each one's
    values (the declared schema, or the prepared data's domain, which holds every value the
    aggregates can publish), so no size met after the charges can exceed them.

    Raises:
        SdsInputError: the sizes, the limit, the fixes; nothing was charged.
    """
    from sds_core.marginals.plan import longest_length
    from sds_core.synthesis.sizes import check_synthesis_size, worst_case_model_bytes

    r = longest_length(len(columns), params.reporting_length)
    chosen = params.reporting_length is None
    if may_build_records(params):
        try:
            check_synthesis_size(len(columns), sum(cardinalities), r)
        except SdsInputError as e:
            longest = ", the longest the SDS plan may choose" if chosen else ""
            raise SdsInputError(
                f"{e} (synthesis from records at reporting length {r}{longest}). Nothing was "
                "charged."
            ) from e
    if may_draw_model(params):
        try:
            worst_case_model_bytes(
                columns, cardinalities, r, max_model_bytes=params.max_model_bytes
            )
        except SdsInputError as e:
            if params.synthesis is not None:
                raise
            raise SdsInputError(
                "the synthesis is left to the SDS plan, which may draw the records from the "
                "consistent model (pin synthesis = 'records' to rule it out, or set "
                f"reconcile_one_way): {e}"
            ) from e
