"""sds_core: the pure DP core of the release pipeline (numpy/pandas/pyarrow only).

Map of the package (stages in pipeline order):
- domain, table, aggregates: the value objects (Domain, PreparedTable, AggregateSet)
- binning, prepare (prepare_input, prepare_output): SDS preprocessing of a DataFrame/Arrow
  table into a PreparedTable, declared bins, decoding back to frames, fingerprints
- exact: exact k-tuple aggregation and record sensitivities (never released)
- randomness, noise, accounting, percentile: DP building blocks (keyed exact noise, budget
  plan and zCDP conversion, the DP percentile with a data-independent base measure)
- params, dp_aggregate (combinations, contributions, privacy_report), normalize: the DP
  marginals engine, stage by stage
- declared, declared_step: declared (weakly constrained) domains, CatHist, and the engine's
  1-tuple step over declared domains
- synthesize (synthesize_layout, synthesize_ordered, synthesize_kernels): aggregate-seeded
  synthesis; evaluate (evaluate_publish): utility and risk
- synthesizers: registry of all synthesizers (aggregate-seeded and the seeds' other methods)

The functions ``prepare``, ``dp_aggregate`` and ``synthesize`` share their module's name: at
package level ``sds_core.dp_aggregate`` is the function; import module members explicitly
(``from sds_core.dp_aggregate import plan_release``), never ``from sds_core import dp_aggregate``
to mean the module.
"""

from sds_core.accounting import (
    BudgetPlan,
    StageSpend,
    default_delta,
    epsilon_to_zcdp,
    plan_budget,
    zcdp_to_epsilon,
)
from sds_core.aggregates import AggregateSet, CombinationCounts
from sds_core.binning import Binning
from sds_core.declared import DeclaredDomain, declared_one_tuples
from sds_core.domain import EMPTY_CODE, Domain
from sds_core.dp_aggregate import (
    DpResult,
    LengthStep,
    PrivacyReport,
    RecordCountStep,
    aggregate_length,
    dp_aggregate,
    finalize,
    plan_release,
    protect_record_count,
)
from sds_core.errors import SdsInputError, SdsInternalError
from sds_core.evaluate import (
    EvaluationParams,
    evaluate_release,
    marginal_fidelity,
    publishable_evaluation,
)
from sds_core.exact import exact_aggregates, record_sensitivities
from sds_core.noise import discrete_gaussian, discrete_laplace, table_delta
from sds_core.params import AccuracyMode, DpParams, FabricationMode
from sds_core.percentile import dp_percentile
from sds_core.prepare import PrepareParams, prepare
from sds_core.prepare_output import fingerprint, to_arrow, to_frame, to_sorted_rows
from sds_core.randomness import ReleaseRandomness
from sds_core.synthesize import SynthesisParams, synthesize
from sds_core.synthesizers import (
    FitResult,
    Synthesizer,
    SynthesizerSpend,
    available,
    create,
    register,
)
from sds_core.table import MultiValueColumn, PreparedTable

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
    "prepare",
    "protect_record_count",
    "publishable_evaluation",
    "record_sensitivities",
    "register",
    "synthesize",
    "table_delta",
    "to_arrow",
    "to_frame",
    "to_sorted_rows",
    "zcdp_to_epsilon",
]
