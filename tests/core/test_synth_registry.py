"""Tests of the synthesizer interface and the by-name registry."""

from __future__ import annotations

import json
import math
from dataclasses import FrozenInstanceError

import numpy as np
import pytest
from synth_helpers import make_table

from sds_core.dp.declared import DeclaredDomain
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.synthesizers import (
    Synthesizer,
    SynthesizerSpend,
    available,
    base,
    create,
    option_names,
    register,
)
from sds_core.synthesizers.base import cell_codes, cell_index, sample_cells

OPTIONS = {
    "aggregate-seeded": {"reporting_length": 2},
    "histogram-1way": {"columns": ("a", "b")},
    "histogram-nway": {"columns": ("a", "b"), "marginal_columns": ("a", "b")},
    "dirichlet-multinomial": {"columns": ("a", "b")},
    "cathist": {
        "declared": (DeclaredDomain("a", values=("x", "y")), DeclaredDomain("b", size=1000))
    },
}


def _table():
    return make_table(
        {"a": ["x", "y", "y", None] * 200, "b": ["unseen-001", "unseen-002", None, "q"] * 200}
    )


def test_seed_synthesizers_are_registered() -> None:
    """All five synthesizers (SDS + the four seed methods) are available by name."""
    assert len(OPTIONS) == 5 and set(OPTIONS) <= set(available())
    for name in OPTIONS:
        assert set(OPTIONS[name]) <= set(option_names(name))
    assert "declared" in option_names("aggregate-seeded")
    with pytest.raises(SdsInputError, match="unknown synthesizer 'gan'"):
        option_names("gan")


def test_aggregate_seeded_equals_dp_aggregate_plus_synthesize() -> None:
    """fit/sample give exactly dp_aggregate + synthesize(SynthesisParams()) with the same key
    (and the aggregates' published noise, which matching reads)."""
    from sds_core.evaluation.agreement import count_sd_by_len
    from sds_core.marginals.engine import dp_aggregate
    from sds_core.marginals.params import DpParams
    from sds_core.synthesis.generator import SynthesisParams, synthesize

    table = _table()
    synth = create("aggregate-seeded", reporting_length=2, accounting="reference")
    fit = synth.fit(
        table, epsilon=3.0, delta=1e-5, rnd=ReleaseRandomness.from_seed(4), release_label="rel"
    )
    ref = dp_aggregate(
        table,
        DpParams(epsilon=3.0, delta=1e-5, reporting_length=2, accounting="reference"),
        ReleaseRandomness.from_seed(4),
        release_label="rel",
    )
    assert fit.model.aggregates.to_text_dict() == ref.aggregates.to_text_dict()
    assert fit.privacy_report == ref.report.to_dict()
    ours = synth.sample(None, rng=np.random.default_rng(8))
    sd = count_sd_by_len(ref.report.sigma_by_len, ref.report.allowed_sensitivity_by_len)
    theirs = synthesize(
        ref.aggregates,
        SynthesisParams(),
        rng=np.random.default_rng(8),
        noise_sd_by_len=[sd[k] for k in sorted(sd)],
    )
    assert ours.domain == theirs.domain
    assert np.array_equal(ours.codes, theirs.codes)
    assert synth.sample(0, rng=np.random.default_rng(0)).n_records == 0


def test_aggregate_seeded_budget_matches_fit_with_declared_domains() -> None:
    """budget() (no data) == fit's spends, also with declared domains; δ must be explicit."""
    declared = (DeclaredDomain("a", values=("x", "y", "z")), DeclaredDomain("b", size=1000))
    synth = create("aggregate-seeded", reporting_length=2, declared=declared)
    fit = synth.fit(
        _table(), epsilon=2.0, delta=1e-6, rnd=ReleaseRandomness.from_seed(1), release_label="r"
    )
    assert fit.spends == synth.budget(2.0, 1e-6)
    assert [s.stage for s in fit.spends] == [
        "aggregate-seeded/count",
        "aggregate-seeded/aggregate-1",
        "aggregate-seeded/aggregate-2",
    ]
    assert fit.private_notes == {"b": {"undeclared_values": ["q"], "n_undeclared_values": 1}}
    assert "q" not in fit.model.domain.labels[1]
    with pytest.raises(SdsInputError, match="explicit delta"):
        synth.budget(2.0, None)
    with pytest.raises(SdsInputError, match="call fit"):
        create("aggregate-seeded").sample(3, rng=np.random.default_rng(0))


def test_unknown_name_lists_known_ones() -> None:
    """An unknown name raises SdsInputError listing the registered names."""
    with pytest.raises(
        SdsInputError, match=r"unknown synthesizer 'gan'; choose one of \[.*cathist"
    ):
        create("gan")
    with pytest.raises(SdsInputError, match="bad options for synthesizer 'histogram-1way'"):
        create("histogram-1way", no_such_option=1)


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_synthesizer_follows_the_protocol(name: str) -> None:
    """budget == fit's spends (summing to ε), model is JSON-able, sample gives a valid table."""
    synth = create(name, **OPTIONS[name])
    assert isinstance(synth, Synthesizer)
    spends = synth.budget(2.0, 1e-6)
    fit = synth.fit(
        _table(), epsilon=2.0, delta=1e-6, rnd=ReleaseRandomness.from_seed(0), release_label="rel"
    )
    assert fit.spends == spends
    assert math.isclose(fit.epsilon, 2.0)
    assert fit.delta <= 1e-6
    assert len({s.stage for s in spends}) == len(spends)
    assert all(s.stage.startswith(name + "/") for s in spends)
    json.dumps(fit.model.as_dict())
    json.dumps(fit.privacy_report)
    syn = synth.sample(None, rng=np.random.default_rng(0))
    assert syn.domain == fit.model.domain
    assert syn.domain.columns == ("a", "b")
    assert 600 < syn.n_records < 1000
    assert synth.sample(17, rng=np.random.default_rng(1)).n_records == 17


def test_sample_before_fit_and_bad_n() -> None:
    """sample() before fit() and a negative n are caller errors."""
    synth = create("histogram-1way", columns=("a",))
    with pytest.raises(SdsInputError, match="call fit"):
        synth.sample(5, rng=np.random.default_rng(0))
    synth.fit(
        _table(), epsilon=1.0, delta=1e-6, rnd=ReleaseRandomness.from_seed(0), release_label="r"
    )
    with pytest.raises(SdsInputError, match="n must be a non-negative integer"):
        synth.sample(-1, rng=np.random.default_rng(0))


def test_register_custom_synthesizer() -> None:
    """A class with a name registers and is created with its options (the adapter's path)."""

    @register
    class Dummy:
        name = "dummy-test"

        def __init__(self, reporting_length: int = 3) -> None:
            self.reporting_length = reporting_length

    try:
        assert create("dummy-test", reporting_length=2).reporting_length == 2
        assert "dummy-test" in available()
    finally:
        base._REGISTRY.pop("dummy-test", None)


def test_spend_is_frozen_and_validated() -> None:
    """SynthesizerSpend is immutable and refuses negative ε."""
    s = SynthesizerSpend("x/count", "discrete-laplace", 0.1, 0.0, 0.005)
    with pytest.raises(FrozenInstanceError):
        s.epsilon = 1.0  # type: ignore[misc]
    with pytest.raises(SdsInputError, match=r"epsilon of stage 'x' must be a finite number"):
        SynthesizerSpend("x", "m", -1.0, 0.0, None)


def test_cell_index_round_trip_and_sampling() -> None:
    """Mixed-radix cells round-trip with empty as the last category; weights drive sampling."""
    codes = np.array([[0, -1], [1, 2], [-1, -1]], dtype=np.int32)
    cells = cell_index(codes, (2, 3))
    assert cells.tolist() == [3, 6, 11]
    assert cell_codes(cells, (2, 3)).tolist() == codes.tolist()
    draws = sample_cells(np.array([0.0, 3.0, 1.0]), 4000, rng=np.random.default_rng(0))
    assert np.mean(draws == 1) == pytest.approx(0.75, abs=0.03) and not (draws == 0).any()
    assert (sample_cells(np.zeros(3), 5, rng=np.random.default_rng(0)) == -1).all()


def test_aggregate_seeded_options_are_dp_params_fields() -> None:
    """The options are DpParams' fields but ε and δ (same defaults and specs, declared there);
    from_dp_params and dp_params convert both ways."""
    from dataclasses import fields

    from sds_core.marginals.params import DpParams
    from sds_core.synthesizers.aggregate_seeded import AggregateSeeded

    dp = {f.name: f for f in fields(DpParams)}
    opts = {f.name: f for f in fields(AggregateSeeded) if f.init}
    renamed = {"declared": "declared_domains"}
    assert [renamed.get(n, n) for n in opts] == [n for n in dp if n not in ("epsilon", "delta")]
    for name, f in opts.items():
        source = dp[renamed.get(name, name)]
        assert f.default == source.default and f.metadata == source.metadata
    params = DpParams(
        epsilon=2.0,
        delta=1e-6,
        reporting_length=2,
        accounting="reference",
        declared_domains=(DeclaredDomain("a", values=("x", "y")),),
    )
    synth = AggregateSeeded.from_dp_params(params)
    assert synth.reporting_length == 2 and synth.declared == params.declared_domains
    assert synth.dp_params(2.0, 1e-6) == params
    assert AggregateSeeded().dp_params(4.0, 1e-6) == DpParams(delta=1e-6)
    with pytest.raises(SdsInputError, match=r"DpParams\.percentile_percentage must be"):
        create("aggregate-seeded", percentile_percentage=101)
