"""The SDS plan: R, the split and the synthesis chosen from the DP record count (issue 22)."""

from __future__ import annotations

import dataclasses
import inspect
import math

import pytest

from sds_core.data.domain import Domain
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.params import AccuracyMode, DpParams, FabricationMode
from sds_core.marginals.plan import (
    LONG_FIT_ITERATIONS,
    LONG_FIT_MAX_CELLS,
    LONG_FIT_WORK,
    MAX_LENGTH_1_SHARE,
    MAX_RECORDS_EXCESS,
    MODEL_ITERATIONS,
    PLAN_SYNTHESES,
    SIGNAL_FOR_LENGTH_3,
    SIGNAL_FOR_LONG_FIT,
    SdsPlan,
    length_one_share,
    longest_length,
    noise_excess,
    pair_noise,
    plan_sds,
)

PUMS = {"epsilon": 4.0, "delta": 1e-6, "n_columns": 11}


def _share(plan: SdsPlan) -> float:
    w = [1 / p**2 for p in plan.sigma_proportions]
    return w[0] / sum(w)


def test_few_records_per_noise_unit_plan_pairs_and_the_model() -> None:
    """10k records at ε = 4: R = 2, most budget to single values, the consistent model."""
    plan = plan_sds(10_000, **PUMS)
    assert plan.reporting_length == 2
    assert plan.synthesis == "model"
    assert plan.model_structure == "pair-dependence"
    assert _share(plan) == pytest.approx(length_one_share(plan.signal))
    assert 0.6 < _share(plan) <= MAX_LENGTH_1_SHARE
    assert set(plan.chosen) == {"reporting_length", "sigma_proportions", "synthesis"}


def test_many_records_per_noise_unit_plan_today_s_default() -> None:
    """1M records at ε = 4: exactly today's default (R = 3, prioritize_long, records)."""
    plan = plan_sds(1_000_000, **PUMS)
    assert plan.reporting_length == 3
    assert plan.synthesis == "records"
    assert plan.sigma_proportions == DpParams().sigma_proportions
    base = DpParams(epsilon=4.0, delta=1e-6)
    assert plan.dp_params(base) == base  # same parameters, so the same release


def test_length_one_share_falls_as_the_signal_grows() -> None:
    """More records (or ε) per unit of noise: never more budget to single values."""
    shares = [_share(plan_sds(n, **PUMS)) for n in (1_000, 10_000, 30_000, 100_000, 150_000)]
    assert shares == sorted(shares, reverse=True)
    assert shares[0] == MAX_LENGTH_1_SHARE
    assert shares[-1] < 0.15


def test_switch_to_length_three_at_the_documented_signal() -> None:
    """R is 2 just below SIGNAL_FOR_LENGTH_3 records per noise unit and 3 at it."""
    noise = pair_noise(4.0, 1e-6, 11, 0.005)
    below = math.floor(SIGNAL_FOR_LENGTH_3 * noise) - 1
    assert plan_sds(below, **PUMS).reporting_length == 2
    assert plan_sds(below + 2, **PUMS).reporting_length == 3


def test_signal_is_records_per_pair_noise() -> None:
    """The signal is N̂ over the pair noise; more columns means more noise per pair count."""
    assert plan_sds(10_000, **PUMS).signal == pytest.approx(
        10_000 / pair_noise(4.0, 1e-6, 11, 0.005)
    )
    assert pair_noise(4.0, 1e-6, 20, 0.005) > pair_noise(4.0, 1e-6, 11, 0.005)
    assert pair_noise(1.0, 1e-6, 11, 0.005) > pair_noise(4.0, 1e-6, 11, 0.005)


@pytest.mark.parametrize("n_hat", [10_000, 1_000_000])
def test_user_values_are_kept(n_hat: int) -> None:
    """A reporting length, a split and a synthesis the user set are never replaced."""
    plan = plan_sds(n_hat, **PUMS, reporting_length=4, synthesis="records")
    assert plan.reporting_length == 4 and plan.synthesis == "records"
    custom = AccuracyMode.custom([1.0, 2.0])
    plan = plan_sds(n_hat, **PUMS, reporting_length=2, accuracy_mode=custom)
    assert plan.sigma_proportions == (1.0, 2.0)
    assert "sigma_proportions" not in plan.chosen and "reporting_length" not in plan.chosen
    assert "split" in plan.reason and "set by you" in plan.reason
    plan = plan_sds(n_hat, **PUMS, synthesis="model")
    assert plan.synthesis == "model"


def test_pinned_configuration_keeps_today_s_parameters() -> None:
    """R and synthesis set: the DP parameters and the model settings are today's defaults."""
    plan = plan_sds(10_000, **PUMS, reporting_length=3, synthesis="model")
    base = DpParams(epsilon=4.0, delta=1e-6, fabrication_mode=FabricationMode.balanced())
    assert plan.dp_params(base) == base
    assert (plan.model_structure, plan.model_iterations) == ("g-statistic", 100)
    assert plan.chosen == ("sigma_proportions",)  # today's default split for R = 3


def test_dp_params_keeps_every_other_field() -> None:
    """The plan changes R and the split only: thresholds, shares, accounting stay."""
    base = DpParams(
        epsilon=4.0,
        delta=1e-6,
        percentile_percentage=95,
        number_of_records_epsilon_proportion=0.01,
        fabrication_mode=FabricationMode.minimize(),
        accounting="reference",
    )
    params = plan_sds(10_000, **PUMS).dp_params(base)
    assert params.reporting_length == 2
    assert params.sigma_proportions == plan_sds(10_000, **PUMS).sigma_proportions
    changed = {
        f.name
        for f in dataclasses.fields(DpParams)
        if getattr(params, f.name) != getattr(base, f.name)
    }
    assert changed == {"reporting_length", "accuracy_mode"}


def test_model_cells_follow_the_record_count() -> None:
    """The model holds ~10 cells per DP record, between 100k and 1.5M."""
    assert plan_sds(5_000, **PUMS).max_model_cells == 100_000
    assert plan_sds(80_000, **PUMS).max_model_cells == 800_000


def test_precise_counts_get_a_longer_fit_within_its_work() -> None:
    """300 iterations below SIGNAL_FOR_LONG_FIT; from it on up to 1,000 while cells x iterations
    stay within LONG_FIT_WORK, for models of at most LONG_FIT_MAX_CELLS cells."""
    noise = pair_noise(4.0, 1e-6, 11, 0.005)
    below = math.floor(SIGNAL_FOR_LONG_FIT * noise) - 1
    assert plan_sds(below, **PUMS).model_iterations == MODEL_ITERATIONS
    at = plan_sds(below + 2, **PUMS)
    assert at.max_model_cells == 10 * (below + 2)
    assert at.model_iterations == min(LONG_FIT_ITERATIONS, LONG_FIT_WORK // at.max_model_cells)
    assert at.model_iterations > MODEL_ITERATIONS
    assert plan_sds(10_000, **(PUMS | {"epsilon": 10.0})).model_iterations == LONG_FIT_ITERATIONS
    hundred_k = plan_sds(100_000, **(PUMS | {"epsilon": 1.0}))
    assert hundred_k.max_model_cells == 1_000_000 <= LONG_FIT_MAX_CELLS
    assert hundred_k.model_iterations == LONG_FIT_WORK // 1_000_000
    big = plan_sds(130_000, **(PUMS | {"epsilon": 1.0}))
    assert big.max_model_cells > LONG_FIT_MAX_CELLS and big.model_iterations == MODEL_ITERATIONS
    assert plan_sds(1_000_000, **PUMS).model_iterations == MODEL_ITERATIONS


def test_one_column_releases_single_values() -> None:
    """With one column there are no pairs: R = 1."""
    plan = plan_sds(10_000, epsilon=4.0, delta=1e-6, n_columns=1)
    assert plan.reporting_length == 1 and plan.sigma_proportions == (1.0,)
    assert "single values only" in plan.reason


def test_reads_only_public_inputs_and_the_dp_count() -> None:
    """The plan's inputs are N̂, (ε, δ, N_p), the column count and the user's own settings."""
    names = list(inspect.signature(plan_sds).parameters)
    assert names == [
        "protected_number_of_records",
        "epsilon",
        "delta",
        "n_columns",
        "number_of_records_epsilon_proportion",
        "reporting_length",
        "accuracy_mode",
        "synthesis",
    ]
    assert plan_sds(12_345, **PUMS) == plan_sds(12_345, **PUMS)


def test_as_dict_is_json_ready() -> None:
    """The manifest form has lists and a rounded signal."""
    d = plan_sds(10_000, **PUMS).as_dict()
    assert isinstance(d["sigma_proportions"], list) and isinstance(d["chosen"], list)
    assert d["reporting_length"] == 2 and d["reason"].startswith("About 10,000 records")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"protected_number_of_records": 0}, "DP record count must be an integer >= 1"),
        ({"protected_number_of_records": 3.5}, "DP record count must be an integer >= 1"),
        ({"epsilon": 0.0}, "epsilon must be finite and > 0"),
        ({"epsilon": math.inf}, "epsilon must be finite and > 0"),
        ({"delta": 1.0}, r"delta must be in \(0, 1\)"),
        ({"n_columns": 0}, "n_columns must be an integer >= 1"),
        ({"number_of_records_epsilon_proportion": 1.0}, "number_of_records_epsilon_proportion"),
        ({"reporting_length": 0}, "reporting_length must be in 1..10"),
        ({"synthesis": "aim"}, "synthesis must be one of"),
    ],
)
def test_bad_inputs_are_refused(kwargs: dict[str, object], match: str) -> None:
    """Each rule is checked and named."""
    args: dict[str, object] = {"protected_number_of_records": 10_000, **PUMS, **kwargs}
    with pytest.raises(SdsInputError, match=match):
        plan_sds(**args)  # type: ignore[arg-type]


def _aggregates(triple: int) -> AggregateSet:
    """R = 3 over three one-value columns of 100 records; the triple's DP count is given."""
    d = Domain(("A", "B", "C"), (("a",), ("b",), ("c",)))
    counts = {"A:a": 100, "B:b": 100, "C:c": 100, "A:a;B:b": 100, "A:a;C:c": 100}
    counts.update({"B:b;C:c": 100, "A:a;B:b;C:c": triple})
    return AggregateSet.from_text_dict(d, counts, 3, is_dp=True, protected_number_of_records=100)


def test_noise_excess_is_the_published_surplus_over_what_records_hold() -> None:
    """100 records of 3 values hold 100 triples: 100 published is no excess, 180 is 80%."""
    assert noise_excess(_aggregates(100)) == pytest.approx(0.0)
    assert noise_excess(_aggregates(180)) == pytest.approx(0.8)


def test_noisy_long_combinations_switch_records_to_the_model() -> None:
    """Above length 2, records stay only while the excess is at most MAX_RECORDS_EXCESS."""
    plan = plan_sds(1_000_000, **PUMS)
    clean = _aggregates(round(100 * (1 + MAX_RECORDS_EXCESS)))
    assert plan.after_aggregation(clean) == plan
    noisy = plan.after_aggregation(_aggregates(200))
    assert noisy.synthesis == "model" and plan.synthesis == "records"
    assert "hold 100% more than the records can" in noisy.reason
    assert not noisy.reconcile_one_way and plan.reconcile_one_way  # records reconciled only
    back = dataclasses.replace(
        noisy, synthesis="records", reason=plan.reason, reconcile_one_way=True
    )
    assert back == plan


def test_after_aggregation_keeps_a_user_synthesis_and_length_two_plans() -> None:
    """A synthesis the user set, or a plan of R = 2, is not revisited."""
    mine = plan_sds(1_000_000, **PUMS, synthesis="records")
    assert mine.after_aggregation(_aggregates(300)) == mine
    small = plan_sds(10_000, **PUMS)
    assert small.after_aggregation(_aggregates(300)) == small


def test_a_plan_read_back_from_its_dict_is_the_plan_as_written() -> None:
    """``SdsPlan.from_dict(plan.as_dict())``: every field, the signal as written (rounded); a
    dict written before a field with a default existed reads it at its default; a dict
    missing a field without one is refused, naming it."""
    plan = plan_sds(1_000_212, epsilon=4.0, delta=1e-6, n_columns=11)
    written = plan.as_dict()
    back = SdsPlan.from_dict(written)
    assert back == dataclasses.replace(plan, signal=written["signal"])
    assert back.as_dict() == written and isinstance(back.chosen, tuple)
    older = {k: v for k, v in written.items() if k != "reconcile_one_way"}
    assert SdsPlan.from_dict(older).reconcile_one_way is False
    with pytest.raises(SdsInputError, match=r"an SDS plan without \['reason'\]"):
        SdsPlan.from_dict({k: v for k, v in written.items() if k != "reason"})


@pytest.mark.parametrize("n_columns", [1, 2, 3, 11, 40])
def test_the_plan_never_picks_longer_than_the_size_checks_assume(n_columns: int) -> None:
    """longest_length is what the size checks before the first charge are computed for: over
    DP counts from 1 to 10^8 and any ε the plan's R is never longer (and the user's R is kept)."""
    for n_hat in (1, 10, 1_000, 30_000, 10**6, 10**8):
        for epsilon in (0.1, 1.0, 10.0):
            plan = plan_sds(n_hat, epsilon=epsilon, delta=1e-6, n_columns=n_columns)
            assert plan.reporting_length <= longest_length(n_columns)
            assert plan.synthesis in PLAN_SYNTHESES
    assert longest_length(n_columns, 5) == 5
