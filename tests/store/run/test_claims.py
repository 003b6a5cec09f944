"""What a release claims in its manifest (issue #27 points 6 and 7): ``private`` and why not,
the effective δ and its parts, all from public parameters and the column count."""

from __future__ import annotations

from typing import Any

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config import build_params
from sds_release.store.run.claims import SEEDED_WARNING, privacy_claims


def _params(**extra: Any) -> Any:
    base = {"dataset": "d", "input": "x.csv", "epsilon": 4.0, "delta": 1e-6}
    return build_params(base | extra, {})


def test_an_unseeded_release_is_private_with_its_effective_delta() -> None:
    """No seed: private, no reason; effective δ ≤ δ, the same for any data of 11 columns."""
    claims = privacy_claims(_params(), 11)
    assert claims["private"] is True and "not_private" not in claims
    parts = claims["delta_parts"]
    assert claims["effective_delta"] <= 1e-6 and parts["zcdp"] == 5e-7
    assert 0 < parts["noise_sampler"] < 1e-12
    assert privacy_claims(_params(), 12)["delta_parts"]["noise_sampler"] > parts["noise_sampler"]


def test_a_seeded_release_is_not_private() -> None:
    """seed: private false and the one sentence the CLI, report and explorer show."""
    claims = privacy_claims(_params(seed=3), 11)
    assert claims["private"] is False and claims["not_private"] == SEEDED_WARNING
    assert SEEDED_WARNING.startswith("NOT PRIVATE")
    assert "regenerated from the seed" in SEEDED_WARNING


def test_a_registry_synthesizer_has_no_sds_delta_parts() -> None:
    """A registry synthesizer's δ follows its own plan: no SDS δ parts are claimed."""
    claims = privacy_claims(_params(synthesizer="histogram-1way"), 11)
    assert claims == {"private": True}


def test_samplers_that_do_not_fit_are_refused() -> None:
    """ε = 60 with δ = 1e-9: refused, naming the fix."""
    with pytest.raises(SdsInputError, match="does not fit in δ/2"):
        privacy_claims(_params(epsilon=60.0, delta=1e-9), 11)
