"""sds_core: the pure DP core of the release pipeline (numpy, pandas, pyarrow, numba only).

Packages in pipeline order (the SDS crate's data block -> dp -> aggregator -> generator ->
evaluator):

- ``data``: value objects of the input (``Domain``, ``PreparedTable``), SDS preprocessing
  (``preparation``), readers of tables (``readers``), declared binning (``binning``) and decoding
  codes back to text (``decoding``);
- ``dp``: the DP building blocks: keyed release randomness, exact integer noise, the DP
  percentile, DP quantile bin edges, zCDP accounting, declared (weakly constrained) domains and
  CatHist;
- ``marginals``: the DP marginals engine stage by stage (``engine``: protect the record count,
  plan, aggregate each length, finalize), its parameters, the ``AggregateSet`` it publishes, the
  privacy report, combinations, contribution bounding, normalization, exact counts, and its
  compiled kernels (``_kernels``, ``_count_kernels``), and the SDS plan (``plan``: R, the split
  and the synthesis chosen from the DP record count);
- ``synthesis``: aggregate-seeded synthesis (``generator``), the aggregates' flat ``layout`` and
  the compiled kernels (``_completion_kernel``: default; ``_reference_kernel``: pac-synth's mode),
  the optional 1-way reconciliation of the records (``reconcile``), and the consistent model
  of the published aggregates (``consistent``, ``synthesis = "model"``);
- ``model``: one distribution fitted to noisy and censored marginals (junction tree, belief
  propagation, Private-PGM's mirror descent, controlled-rounding sampler, size check);
- ``evaluation``: utility and risk metrics (not DP), the agreement of the DP aggregates and the
  synthetic records (from published values);
- ``synthesizers``: every synthesizer behind one ``fit``/``sample`` interface, by name.

The public API is what this module exports; it is loaded lazily, so ``import sds_core`` is cheap.

>>> import sds_core
>>> "prepare" in sds_core.__all__ and callable(sds_core.prepare)
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "AccuracyMode": "sds_core.marginals.params",
    "AggregateSet": "sds_core.marginals.aggregates",
    "Binning": "sds_core.data.binning",
    "BudgetPlan": "sds_core.dp.accounting",
    "CombinationCounts": "sds_core.marginals.aggregates",
    "DeclaredDomain": "sds_core.data.domain",
    "Domain": "sds_core.data.domain",
    "DpParams": "sds_core.marginals.params",
    "DpResult": "sds_core.marginals.engine",
    "EMPTY_CODE": "sds_core.data.domain",
    "EvaluationParams": "sds_core.evaluation.params",
    "FabricationMode": "sds_core.marginals.params",
    "FitResult": "sds_core.synthesizers",
    "LengthStep": "sds_core.marginals.steps",
    "MultiValueColumn": "sds_core.data.table",
    "PrepareParams": "sds_core.data.params",
    "PreparedTable": "sds_core.data.table",
    "PrivacyReport": "sds_core.marginals.privacy_report",
    "RecordCountStep": "sds_core.marginals.steps",
    "SdsPlan": "sds_core.marginals.plan",
    "ReleaseRandomness": "sds_core.dp.randomness",
    "SdsInputError": "sds_core.errors",
    "SdsInternalError": "sds_core.errors",
    "StageSpend": "sds_core.dp.accounting",
    "SynthesisParams": "sds_core.synthesis.params",
    "Synthesizer": "sds_core.synthesizers",
    "SynthesizerSpend": "sds_core.synthesizers",
    "aggregate_length": "sds_core.marginals.engine",
    "available": "sds_core.synthesizers",
    "create": "sds_core.synthesizers",
    "declared_one_tuples": "sds_core.dp.declared",
    "default_delta": "sds_core.dp.accounting",
    "discrete_gaussian": "sds_core.dp.noise",
    "discrete_laplace": "sds_core.dp.noise",
    "dp_aggregate": "sds_core.marginals.engine",
    "dp_percentile": "sds_core.dp.percentile",
    "epsilon_to_zcdp": "sds_core.dp.accounting",
    "evaluate_release": "sds_core.evaluation.release",
    "exact_aggregates": "sds_core.marginals.exact_counts",
    "finalize": "sds_core.marginals.engine",
    "fingerprint": "sds_core.data.decoding",
    "marginal_fidelity": "sds_core.evaluation.metrics",
    "plan_budget": "sds_core.dp.accounting",
    "plan_release": "sds_core.marginals.engine",
    "plan_sds": "sds_core.marginals.plan",
    "prepare": "sds_core.data.preparation",
    "protect_record_count": "sds_core.marginals.engine",
    "record_sensitivities": "sds_core.marginals.exact_counts",
    "register": "sds_core.synthesizers",
    "synthesize": "sds_core.synthesis.generator",
    "table_delta": "sds_core.dp.noise",
    "to_arrow": "sds_core.data.decoding",
    "to_frame": "sds_core.data.decoding",
    "to_sorted_rows": "sds_core.data.decoding",
    "zcdp_to_epsilon": "sds_core.dp.accounting",
}
"""Public name -> the module that defines it."""

__all__ = [
    "EMPTY_CODE",
    "AccuracyMode",
    "AggregateSet",
    "Binning",
    "BudgetPlan",
    "CombinationCounts",
    "DeclaredDomain",
    "Domain",
    "DpParams",
    "DpResult",
    "EvaluationParams",
    "FabricationMode",
    "FitResult",
    "LengthStep",
    "MultiValueColumn",
    "PrepareParams",
    "PreparedTable",
    "PrivacyReport",
    "RecordCountStep",
    "ReleaseRandomness",
    "SdsInputError",
    "SdsInternalError",
    "SdsPlan",
    "StageSpend",
    "SynthesisParams",
    "Synthesizer",
    "SynthesizerSpend",
    "aggregate_length",
    "available",
    "create",
    "declared_one_tuples",
    "default_delta",
    "discrete_gaussian",
    "discrete_laplace",
    "dp_aggregate",
    "dp_percentile",
    "epsilon_to_zcdp",
    "evaluate_release",
    "exact_aggregates",
    "finalize",
    "fingerprint",
    "marginal_fidelity",
    "plan_budget",
    "plan_release",
    "plan_sds",
    "prepare",
    "protect_record_count",
    "record_sensitivities",
    "register",
    "synthesize",
    "table_delta",
    "to_arrow",
    "to_frame",
    "to_sorted_rows",
    "zcdp_to_epsilon",
]

if TYPE_CHECKING:
    from sds_core.data.binning import Binning
    from sds_core.data.decoding import fingerprint, to_arrow, to_frame, to_sorted_rows
    from sds_core.data.domain import EMPTY_CODE, DeclaredDomain, Domain
    from sds_core.data.params import PrepareParams
    from sds_core.data.preparation import prepare
    from sds_core.data.table import MultiValueColumn, PreparedTable
    from sds_core.dp.accounting import (
        BudgetPlan,
        StageSpend,
        default_delta,
        epsilon_to_zcdp,
        plan_budget,
        zcdp_to_epsilon,
    )
    from sds_core.dp.declared import declared_one_tuples
    from sds_core.dp.noise import discrete_gaussian, discrete_laplace, table_delta
    from sds_core.dp.percentile import dp_percentile
    from sds_core.dp.randomness import ReleaseRandomness
    from sds_core.errors import SdsInputError, SdsInternalError
    from sds_core.evaluation.metrics import marginal_fidelity
    from sds_core.evaluation.params import EvaluationParams
    from sds_core.evaluation.release import evaluate_release
    from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
    from sds_core.marginals.engine import (
        DpResult,
        aggregate_length,
        dp_aggregate,
        finalize,
        plan_release,
        protect_record_count,
    )
    from sds_core.marginals.exact_counts import exact_aggregates, record_sensitivities
    from sds_core.marginals.params import AccuracyMode, DpParams, FabricationMode
    from sds_core.marginals.plan import SdsPlan, plan_sds
    from sds_core.marginals.privacy_report import PrivacyReport
    from sds_core.marginals.steps import LengthStep, RecordCountStep
    from sds_core.synthesis.generator import synthesize
    from sds_core.synthesis.params import SynthesisParams
    from sds_core.synthesizers import (
        FitResult,
        Synthesizer,
        SynthesizerSpend,
        available,
        create,
        register,
    )


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sds_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (for tab completion)."""
    return sorted(set(globals()) | set(_EXPORTS))
