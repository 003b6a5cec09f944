"""sds_core: the pure DP core of the release pipeline (numpy/pandas/pyarrow only).

Map of the package (stages in pipeline order):
- domain, table, aggregates: the value objects (Domain, PreparedTable, AggregateSet)
- prepare: SDS preprocessing of a DataFrame/Arrow table into a PreparedTable
- exact: exact k-tuple aggregation and record sensitivities (never released)
- randomness, noise, accounting, percentile: DP building blocks
- dp_aggregate, normalize: the DP marginals engine, stage by stage
- synthesize: aggregate-seeded synthesis; evaluate: utility and risk metrics
- synthesizers: registry of all synthesizers (SDS and the seeds' other methods)
"""

from sds_core.aggregates import AggregateSet, CombinationCounts
from sds_core.domain import EMPTY_CODE, Domain
from sds_core.errors import SdsInputError, SdsInternalError
from sds_core.randomness import ReleaseRandomness
from sds_core.table import MultiValueColumn, PreparedTable

__all__ = [
    "EMPTY_CODE",
    "AggregateSet",
    "CombinationCounts",
    "Domain",
    "MultiValueColumn",
    "PreparedTable",
    "ReleaseRandomness",
    "SdsInputError",
    "SdsInternalError",
]
