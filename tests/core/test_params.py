"""Tests of sds_core.marginals.params: defaults, presets and validation of DpParams and the
modes."""

from __future__ import annotations

import math

import pytest

from sds_core.dp.accounting import default_delta
from sds_core.errors import SdsInputError
from sds_core.marginals.params import (
    DEFAULT_DELTA,
    MAX_DEFAULT_DELTA,
    AccuracyMode,
    DpParams,
    FabricationMode,
    release_delta,
)


def test_defaults_match_pac_synth_builder() -> None:
    """Defaults are pac-synth's: ε 4, R 3, Q 99, Q_p 0.01, N_p 0.005, long/uncontrolled."""
    p = DpParams()
    assert (p.epsilon, p.delta, p.reporting_length, p.percentile_percentage) == (4.0, None, 3, 99)
    assert p.percentile_epsilon_proportion == 0.01
    assert p.number_of_records_epsilon_proportion == 0.005
    assert p.sigma_proportions == pytest.approx((1.0, 0.5, 1 / 3))
    assert p.fabrication_thresholds() == {2: 1.0, 3: 1.0}
    assert p.accounting == "tight" and p.sensitivity_cap is None


def test_accuracy_modes() -> None:
    """The four accuracy modes give the §3.1 proportions."""
    assert AccuracyMode.prioritize_long_combinations().proportions(4) == pytest.approx(
        (1, 1 / 2, 1 / 3, 1 / 4)
    )
    assert AccuracyMode.prioritize_short_combinations().proportions(4) == pytest.approx(
        (1 / 4, 1 / 3, 1 / 2, 1)
    )
    assert AccuracyMode.balanced().proportions(2) == (1.0, 1.0)
    assert AccuracyMode.custom([1, 2, 3]).proportions(3) == (1.0, 2.0, 3.0)


@pytest.mark.parametrize(
    ("mode", "r", "expected"),
    [
        (FabricationMode.uncontrolled(), 4, {2: 1.0, 3: 1.0, 4: 1.0}),
        (FabricationMode.progressive(), 4, {2: 0.1, 3: 0.55, 4: 1.0}),
        (FabricationMode.progressive(), 2, {2: 0.1}),
        (FabricationMode.progressive(), 3, {2: 0.1, 3: 1.0}),
        (FabricationMode.balanced(), 3, {2: 0.55, 3: 1.0}),
        (FabricationMode.balanced(), 1, {}),
        (FabricationMode.minimize(), 3, {2: 0.01, 3: 0.01}),
        (FabricationMode.custom_adaptive({3: 0.2}), 3, {2: 1.0, 3: 0.2}),
        (FabricationMode.custom_fixed({2: 7.5}), 3, {2: 7.5, 3: 0.0}),
    ],
)
def test_fabrication_presets(mode: FabricationMode, r: int, expected: dict[int, float]) -> None:
    """Preset η maps of spec §1.7 and defaults for missing lengths."""
    got = mode.thresholds(r)
    assert got.keys() == expected.keys()
    for k, v in expected.items():
        assert got[k] == pytest.approx(v)


def test_fabrication_kind() -> None:
    """Presets are adaptive; custom_fixed is fixed."""
    assert FabricationMode.minimize().kind == "adaptive"
    assert FabricationMode.custom_fixed({2: 1.0}).kind == "fixed"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon must be"),
        ({"epsilon": -1.0}, "epsilon must be"),
        ({"epsilon": float("nan")}, "epsilon must be"),
        ({"delta": 1.0}, "delta must be in"),
        ({"delta": 0.0}, "delta must be in"),
        ({"reporting_length": 0}, "reporting_length must be"),
        ({"percentile_percentage": 101}, "percentile_percentage must be"),
        ({"percentile_epsilon_proportion": 0.0}, "percentile_epsilon_proportion must be in"),
        ({"percentile_epsilon_proportion": 1.0}, "percentile_epsilon_proportion must be in"),
        (
            {"number_of_records_epsilon_proportion": 1.5},
            "number_of_records_epsilon_proportion must be in",
        ),
        ({"accuracy_mode": AccuracyMode.custom([1.0, 0.5])}, "sigma_proportions must have one"),
        (
            {"fabrication_mode": FabricationMode.custom_adaptive({4: 0.5})},
            "fabrication_mode lengths must be in 2..reporting_length",
        ),
        ({"accounting": "loose"}, "accounting must be one of"),
        ({"sensitivity_cap": 0}, "sensitivity_cap must be"),
    ],
)
def test_bad_dp_params(kwargs: dict, match: str) -> None:
    """Each invalid parameter raises SdsInputError naming the parameter and the rule."""
    with pytest.raises(SdsInputError, match=match):
        DpParams(**kwargs)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: AccuracyMode.custom([1.0, 0.0]), "sigma_proportions must be finite and > 0"),
        (lambda: AccuracyMode.custom([]), "must not be empty"),
        (lambda: FabricationMode.custom_adaptive({1: 0.5}), "keys are combination lengths >= 2"),
        (lambda: FabricationMode.custom_adaptive({2: 0.0}), r"eta must be in \(0, 1\]"),
        (lambda: FabricationMode.custom_adaptive({2: 1.5}), r"eta must be in \(0, 1\]"),
        (lambda: FabricationMode.custom_fixed({2: -1.0}), "must be finite and >= 0"),
        (lambda: AccuracyMode("fancy"), "accuracy_mode kind must be"),
    ],
)
def test_bad_modes(make, match: str) -> None:
    """Invalid accuracy/fabrication modes raise SdsInputError."""
    with pytest.raises(SdsInputError, match=match):
        make()


def test_params_are_frozen_and_hashable() -> None:
    """DpParams is immutable and usable as a cache key."""
    p = DpParams(epsilon=2.0, fabrication_mode=FabricationMode.custom_fixed({2: 3.0}))
    with pytest.raises(AttributeError):
        p.epsilon = 1.0  # type: ignore[misc]
    assert hash(p) == hash(
        DpParams(epsilon=2.0, fabrication_mode=FabricationMode.custom_fixed({2: 3.0}))
    )


@pytest.mark.parametrize(
    ("max_records", "expected"),
    [
        (None, 1e-6),
        (1, 1e-6),
        (2, 1e-6),
        (3, 100 * 1e-6),  # 1/(3·ln 3) = 0.30 is capped
        (1000, 9.999999999999999e-05),  # the cap, bit for bit as releases have always used it
        (100_000, 1 / (100_000 * math.log(100_000))),
        (10**9, 1 / (10**9 * math.log(10**9))),
    ],
)
def test_release_delta_is_the_data_independent_default(
    max_records: int | None, expected: float
) -> None:
    """δ = min(1e-4, 1/(N·ln N)) for a declared bound N >= 3, else 1e-6; exact floats."""
    assert release_delta(max_records) == expected
    assert MAX_DEFAULT_DELTA == 100 * DEFAULT_DELTA


def test_release_delta_uses_the_reference_formula() -> None:
    """Above the cap's range release_delta is default_delta(N), the spec §1.3 formula."""
    for n in (2000, 6065, 10**6):
        assert release_delta(n) == default_delta(n)


def test_engine_default_delta_stays_the_reference_rule() -> None:
    """DpParams(delta=None) still means 1/(ln m·m) of the protected count m (plan_release)."""
    from sds_core.marginals.engine import plan_release

    assert DpParams().delta is None
    assert plan_release(DpParams(), 6065).delta == default_delta(6065)
    assert plan_release(DpParams(delta=1e-7), 6065).delta == 1e-7
