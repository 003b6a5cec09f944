"""What each stage of the DP marginals engine returns: the record-count step and a length step.

Produced by :mod:`sds_core.marginals.engine`, read by the privacy report and by the pipeline's
checkpoints. Every field is DP or public unless its docstring says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sds_core.data.domain import Domain
from sds_core.dp.accounting import StageSpend
from sds_core.marginals.aggregates import CombinationCounts


@dataclass(frozen=True)
class RecordCountStep:
    """The protected (noisy) record count m and its ledger entry (pure ε_N-DP)."""

    protected_number_of_records: int
    spend: StageSpend


@dataclass(frozen=True)
class LengthStep:
    """Output of one length k.

    Attributes:
        length: k.
        survivors: S_k with integer noisy counts (DP).
        allowed_sensitivity: Δ_k chosen by the DP percentile (DP).
        threshold: ρ_k (inf when Δ_k = 0 and nothing is released).
        n_candidates: |V_k|. For k >= 2 a function of DP outputs; for k = 1 it is the number
            of distinct attributes left after contribution bounding, which is NOT
            differentially private: keep it out of published artifacts (with declared
            domains: the total declared size).
        spend: this length's ledger entry.
        domain: k = 1 with declared domains only: the released (DP) domain the survivors and
            all later lengths are coded in (pass it to later lengths and to :func:`finalize`).
        private_notes: for the custodian's private log ONLY (undeclared data values).
    """

    length: int
    survivors: CombinationCounts
    allowed_sensitivity: int
    threshold: float
    n_candidates: int
    spend: StageSpend
    domain: Domain | None = None
    private_notes: Mapping[str, object] = field(default_factory=dict)
