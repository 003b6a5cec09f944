"""What the SDS stages hand each other through the flow, as typed values: the plan stage's
parameters and SDS plan (:class:`PlannedRelease`), each length's DP result
(:class:`LengthResult`) and the noise the manifest describes of it (:class:`LengthNoise`).

Every value here is DP or public. The stages' checkpoints keep their stored form (plain dicts,
so that a release started before resumes from them); a stage builds these from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sds_core.data.domain import Domain
from sds_core.marginals.aggregates import CombinationCounts
from sds_core.marginals.plan import SdsPlan
from sds_release.store.config.release_params import ReleaseParams

__all__ = ["LengthNoise", "LengthResult", "PlannedRelease"]


@dataclass(frozen=True, slots=True)
class PlannedRelease:
    """The ``plan`` stage's result: the parameters the release runs with from here (R, the
    split and the synthesis chosen from the DP record count) and the SDS plan (None: a registry
    synthesizer has none)."""

    params: ReleaseParams
    plan: SdsPlan | None


@dataclass(frozen=True, slots=True)
class LengthNoise:
    """What ``privacy.noise`` reads of a length's DP result: Δ_k and the threshold."""

    allowed_sensitivity: int
    threshold: float


@dataclass(frozen=True, slots=True)
class LengthResult:
    """The ``aggregate-k`` stage's DP result: the surviving combinations with their noisy
    counts, Δ_k (chosen by the DP percentile), the threshold, and (k = 1 with declared
    domains) the released domain every later length is coded in."""

    survivors: CombinationCounts
    allowed_sensitivity: int
    threshold: float
    domain: Domain | None = None

    @classmethod
    def from_checkpoint(cls, done: Mapping[str, Any]) -> LengthResult:
        """The result of an ``aggregate-k`` checkpoint (its private notes left there)."""
        return cls(
            done["survivors"], done["allowed_sensitivity"], done["threshold"], done.get("domain")
        )

    @property
    def noise(self) -> LengthNoise:
        """Δ_k and the threshold, without the survivors (the longest length's are ~100 MB at
        raw 2M, and ``privacy.noise`` needs none of them)."""
        return LengthNoise(self.allowed_sensitivity, self.threshold)
