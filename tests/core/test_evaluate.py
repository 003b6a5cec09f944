"""Tests of sds_core.evaluate: hand-computed SDS metrics, risk, TVD and the NOT-DP labels."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from sds_core.aggregates import AggregateSet
from sds_core.domain import Domain
from sds_core.errors import SdsInputError
from sds_core.evaluate import (
    EvaluationParams,
    aggregate_metrics,
    evaluate_release,
    marginal_fidelity,
    publishable_evaluation,
    risk_metrics,
)
from sds_core.exact import exact_aggregates
from sds_core.table import PreparedTable

AB = Domain(("A", "B"), (("a1", "a2"), ("b1",)))
S = {"A:a1": 20, "A:a2": 5, "B:b1": 12, "A:a1;B:b1": 10}
T = {"A:a1": 18, "B:b1": 15, "A:a1;B:b1": 9, "A:a2;B:b1": 3}


def _agg(counts: dict[str, int], domain: Domain = AB, r: int = 2) -> AggregateSet:
    return AggregateSet.from_text_dict(domain, counts, r)


def test_error_metrics_by_hand() -> None:
    """Suppressed/fabricated % over |S|, mean count over S, mean error over S and T, expansion."""
    m = aggregate_metrics(_agg(S), _agg(T), resolution=10, n_sensitive=100, n_target=110)
    assert m["differentially_private"] is False
    assert m["suppressed_pct"] == pytest.approx(25.0)  # A:a2 missing in T
    assert m["fabricated_pct"] == pytest.approx(25.0)  # A:a2;B:b1 fabricated, 1 / |S| = 4
    assert m["mean_count"] == pytest.approx(47 / 4)
    assert m["mean_error"] == pytest.approx((2 + 3 + 1) / 3)
    assert m["by_length"][1]["mean_count"] == pytest.approx(37 / 3)
    assert m["by_length"][1]["mean_error"] == pytest.approx(2.5)
    assert m["by_length"][2]["mean_error"] == pytest.approx(1.0)
    assert m["by_length"][2]["fabricated_pct"] == pytest.approx(100.0)
    assert m["record_expansion_pct"] == pytest.approx(10.0)


def test_preservation_buckets_and_mpe_by_hand() -> None:
    """Items: S with count >= 10 plus T not yet included; bins 10, 20; MPE = mean over bins."""
    m = aggregate_metrics(_agg(S), _agg(T), resolution=10, n_sensitive=None, n_target=None)
    by_len = m["preservation_by_length"]
    assert by_len[1]["count_preservation"] == pytest.approx((0.9 + 1.0) / 2)
    assert by_len[1]["mean_proportional_error"] == pytest.approx((0.1 + 0.25) / 2)
    assert by_len[1]["mean_combo_count"] == pytest.approx(16.5)
    assert by_len[2]["count_preservation"] == pytest.approx(0.45)
    assert by_len[2]["mean_proportional_error"] == pytest.approx(0.55)
    assert by_len[2]["mean_combo_length"] == pytest.approx(2.0)
    by_count = m["preservation_by_count"]
    assert list(by_count) == [20, 10]
    assert by_count[20]["count_preservation"] == pytest.approx(0.95)
    assert by_count[10]["mean_proportional_error"] == pytest.approx(0.55)
    assert m["mean_proportional_error"] == pytest.approx((0.175 + 0.55) / 2)
    assert m["record_expansion_pct"] is None


def test_empty_count_bins_are_zero_and_count_in_mpe() -> None:
    """A T count of 50 creates bins 10, 20, 40, 80; empty bins are zeros and enter the MPE."""
    t = dict(T, **{"A:a1": 50})
    m = aggregate_metrics(_agg(S), _agg(t), resolution=10, n_sensitive=None, n_target=None)
    by_count = m["preservation_by_count"]
    assert list(by_count) == [80, 40, 20, 10]
    assert by_count[40]["n_combinations"] == 0 and by_count[40]["mean_proportional_error"] == 0
    assert by_count[80]["mean_proportional_error"] == pytest.approx(1.5)  # a1: |50 - 20| / 20
    assert by_count[20]["mean_proportional_error"] == pytest.approx(0.25)  # b1 (15)
    assert m["mean_proportional_error"] == pytest.approx((1.5 + 0 + 0.25 + 0.55) / 4)


def test_metrics_match_across_different_domains() -> None:
    """Combinations are matched by text, so a target over a smaller domain still lines up."""
    small = Domain(("A", "B"), (("a1",), ("b1",)))
    t = {"A:a1": 18, "B:b1": 15, "A:a1;B:b1": 9}
    m = aggregate_metrics(_agg(S), _agg(t, small), resolution=10, n_sensitive=None, n_target=None)
    assert m["suppressed_pct"] == pytest.approx(25.0)
    assert m["fabricated_pct"] == pytest.approx(0.0)


def _table(rows: list[list[str]], domain: Domain) -> PreparedTable:
    codes = [
        [labs.index(v) if v else -1 for v, labs in zip(row, domain.labels, strict=True)]
        for row in rows
    ]
    return PreparedTable(domain, np.asarray(codes, dtype=np.int32))


SEED = Domain(("A", "B", "C"), (("a1", "a2"), ("b1", "b2"), ("c1", "c2")))
SEED_ROWS = [
    ["a1", "b1", "c1"],
    ["a1", "b2", "c1"],
    ["a2", "", "c2"],
    ["a2", "b2", "c1"],
    ["a1", "b2", ""],
]


def test_risk_metrics_on_the_seed_example() -> None:
    """Seed table, R=3: 17 combinations, 10 unique, all rare at k=2; every record has a unique."""
    table = _table(SEED_ROWS, SEED)
    agg = exact_aggregates(table, 3)
    m = risk_metrics(agg, table, resolution=2)
    assert m["unique_combinations_pct"] == pytest.approx(100 * 10 / 17)
    assert m["rare_combinations_pct"] == pytest.approx(100 * 10 / 17)
    # the last record (a1, b2) has counts a1:3, b2:3, a1b2:2: neither unique nor rare at k=2
    assert m["records_with_unique_pct"] == pytest.approx(80.0)
    m3 = risk_metrics(agg, table, resolution=3)
    assert m3["records_with_rare_pct"] == pytest.approx(100.0)
    assert m["by_length"][1]["unique_pct"] == pytest.approx(100 * 2 / 6)
    assert m["differentially_private"] is False


def test_tvd_on_tiny_frames() -> None:
    """1-way TVD by hand (empty counted as a value) and 2-way TVD, plus empty-cell shares."""
    o = pd.DataFrame({"A": ["x", "x", "y", ""], "B": ["u", "u", "u", "v"]})
    s = pd.DataFrame({"A": ["x", "y", "y", "y"], "B": ["u", "u", "u", "v"]})
    m = marginal_fidelity(o, s, max_order=3)
    # A: p = (.5, .25, .25), q = (.25, .75, 0) -> .5 ; B identical -> 0
    assert m["tvd_mean_by_order"][1] == pytest.approx(0.25)
    assert m["tvd_max_by_order"][1] == pytest.approx(0.5)
    # pairs: o = {xu:.5, yu:.25, ''v:.25}, s = {xu:.25, yu:.5, yv:.25} -> (.25+.25+.25+.25)/2
    assert m["tvd_mean_by_order"][2] == pytest.approx(0.5)
    assert 3 not in m["tvd_mean_by_order"]
    assert m["empty_cell_share"] == {"original": pytest.approx(1 / 8), "synthetic": 0.0}
    assert m["differentially_private"] is False


def test_tvd_prepared_table_equals_frame_form() -> None:
    """A PreparedTable and its decoded frame give the same TVD; identical tables give 0."""
    table = _table(SEED_ROWS, SEED)
    frame = pd.DataFrame(SEED_ROWS, columns=list(SEED.columns))
    assert marginal_fidelity(table, frame)["tvd_mean_by_order"] == {1: 0.0, 2: 0.0, 3: 0.0}
    other = _table(SEED_ROWS[:3], SEED)
    a = marginal_fidelity(table, other)["tvd_mean_by_order"]
    b = marginal_fidelity(frame, pd.DataFrame(SEED_ROWS[:3], columns=list(SEED.columns)))
    assert a == b["tvd_mean_by_order"]


def test_evaluate_release_is_labelled_not_dp() -> None:
    """evaluate_release bundles every metric and says it is not differentially private."""
    table = _table(SEED_ROWS, SEED)
    dp = exact_aggregates(table, 2)
    out = evaluate_release(table, _table(SEED_ROWS[::-1], SEED), dp, EvaluationParams(2, 2))
    assert out["differentially_private"] is False
    assert "sensitive data" in out["note"]
    assert out["sensitive_vs_synthetic"]["suppressed_pct"] == 0.0
    assert out["marginal_fidelity"]["tvd_mean_by_order"][2] == 0.0
    assert set(out) >= {"sensitive_vs_dp_aggregates", "sensitive_risk", "synthetic_risk"}


def _leaves(d: object, path: str = "") -> dict[str, object]:
    if isinstance(d, dict):
        return {k: v for key, sub in d.items() for k, v in _leaves(sub, f"{path}/{key}").items()}
    return {path: d}


def test_publishable_evaluation_keeps_rounded_ratios_only() -> None:
    """No record count, n_* count, mean count/error, expansion or sensitive risk; ratios rounded."""
    import json

    rng = np.random.default_rng(2)
    n = 1237  # a record count that no kept ratio can print as a token
    frame = pd.DataFrame({c: rng.choice(["a", "b", "c", ""], size=n) for c in "PQR"})
    from sds_core.prepare import prepare

    table = prepare(frame)
    dp = exact_aggregates(table, 2)
    dp = AggregateSet(dp.domain, 2, dp.by_len, protected_number_of_records=n + 17, is_dp=True)
    syn = PreparedTable(table.domain, table.codes[rng.permutation(n)[: n - 100]])
    full = evaluate_release(table, syn, dp, EvaluationParams(2, 5, 2))
    assert full["sensitive_vs_synthetic"]["record_expansion_pct"] is not None  # it was there
    for ev in (full, json.loads(json.dumps(full))):  # also after a checkpoint's JSON trip
        pub = publishable_evaluation(ev)
        assert pub["differentially_private"] is False and "NOT" in pub["note"]
        leaves = _leaves(pub)
        names = " ".join(leaves)
        for gone in ("expansion", "mean_count", "mean_error", "n_sensitive", "n_target",
                     "n_combinations", "mean_combo_count", "sensitive_risk"):
            assert gone not in names
        assert str(n) not in json.dumps(pub)
        assert "/marginal_fidelity/tvd_mean_by_order/2" in leaves
        assert "/sensitive_vs_dp_aggregates/by_length/1/suppressed_pct" in leaves
        assert "/synthetic_risk/records_with_rare_pct" in leaves
        for path, v in leaves.items():
            if isinstance(v, float):
                digits = 2 if path.endswith("/original") else (1 if "pct" in path else 3)
                assert v == round(v, digits), path
    assert publishable_evaluation({"status": "x"})["differentially_private"] is False


X = pd.DataFrame({"A": ["x"]})


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: EvaluationParams(resolution=0), "resolution"),
        (lambda: EvaluationParams(reporting_length=True), "reporting_length"),
        (lambda: marginal_fidelity(X, pd.DataFrame({"B": ["x"]})), "differ"),
        (lambda: marginal_fidelity(X, pd.DataFrame({"A": []})), "non-empty"),
        (lambda: aggregate_metrics(_agg(S), _agg(T), resolution=0, n_sensitive=1, n_target=1),
         "resolution"),
    ],
)  # fmt: skip
def test_bad_input(call: Callable[[], object], match: str) -> None:
    """Invalid parameters and mismatched tables raise SdsInputError naming the problem."""
    with pytest.raises(SdsInputError, match=match):
        call()
