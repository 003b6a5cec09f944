"""The ``mst`` synthesizer: budget, DP measurements, published aggregates, model and samples."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sds_core.data.preparation import prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.evaluation.metrics import marginal_fidelity
from sds_core.synthesizers import available, create
from sds_core.synthesizers.mst import Mst, gaussian_tail, release_threshold


def _frame(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    """A 4-column table where A and B are strongly dependent, C and D are noise."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, n)
    return pd.DataFrame(
        {
            "A": [f"a{v}" for v in a],
            "B": [f"b{(v + (rng.random() < 0.1)) % 5}" for v in a],
            "C": [f"c{v}" for v in rng.integers(0, 3, n)],
            "D": [f"d{v}" for v in rng.integers(0, 2, n)],
        }
    )


def test_registered() -> None:
    """mst is creatable by name."""
    assert "mst" in available()
    assert isinstance(create("mst"), Mst)


def test_budget_adds_up_exactly() -> None:
    """Three stages whose ε, δ add up exactly to the release's and whose ρ are the thirds."""
    spends = create("mst").budget(2.0, 1e-6)
    assert [s.stage for s in spends] == ["mst/one-way", "mst/select", "mst/two-way"]
    assert math.fsum(s.epsilon for s in spends) == 2.0
    assert math.fsum(s.delta for s in spends) == 1e-6
    rhos = [s.rho for s in spends]
    assert rhos[0] == pytest.approx(rhos[1]) == pytest.approx(rhos[2])


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"one_way_share": 0.0}, "one_way_share"),
        ({"one_way_share": 0.6, "select_share": 0.5}, "leave a share"),
        ({"iterations": 0}, "iterations"),
    ],
)
def test_bad_options(options: dict, match: str) -> None:
    """Invalid shares or settings are input errors naming them."""
    with pytest.raises(SdsInputError, match=match):
        create("mst", **options)


def test_delta_required() -> None:
    """Values read from the data need δ: None is refused before anything else."""
    with pytest.raises(SdsInputError, match="needs delta"):
        create("mst").budget(1.0, None)


def test_threshold_bounds_a_single_record() -> None:
    """The value threshold lets a one-record value through with probability at most δ."""
    t = release_threshold(5.0, 1e-6)
    assert gaussian_tail(5.0, t - 1) <= 1e-6 < gaussian_tail(5.0, t - 2)


def test_fit_spends_the_budget_and_publishes_its_measurements() -> None:
    """fit charges exactly budget(); the model's aggregates are its DP 1- and 2-way counts."""
    table = prepare(_frame())
    synth = create("mst")
    fit = synth.fit(
        table, epsilon=4.0, delta=1e-6, rnd=ReleaseRandomness.from_seed(1), release_label="r"
    )
    assert fit.spends == synth.budget(4.0, 1e-6)
    agg = fit.model.aggregates
    assert agg.is_dp and agg.reporting_length == 2
    assert set(agg.by_len) == {1, 2} and len(agg.counts_of(2)) > 0
    assert ["A", "B"] in fit.privacy_report["tree"]  # the dependent pair is chosen
    records = synth.sample(None, rng=np.random.default_rng(0))
    assert abs(records.n_records - 3000) < 100
    tvd = marginal_fidelity(table, records, max_order=2)["tvd_mean_by_order"]
    assert tvd[1] < 0.03 and tvd[2] < 0.05


def test_same_key_same_release() -> None:
    """The same key and table give the same measurements and the same records."""
    outs = []
    for _ in range(2):
        synth = create("mst")
        synth.fit(
            prepare(_frame()),
            epsilon=1.0,
            delta=1e-6,
            rnd=ReleaseRandomness.from_seed(7),
            release_label="r",
        )
        outs.append(synth.sample(None, rng=np.random.default_rng(3)).codes)
    assert (outs[0] == outs[1]).all()


def test_rare_value_is_not_released() -> None:
    """A value held by one record stays below the threshold: it is not in the released domain."""
    frame = _frame(2000)
    frame.loc[0, "C"] = "unique-value"
    synth = create("mst")
    fit = synth.fit(
        prepare(frame),
        epsilon=1.0,
        delta=1e-6,
        rnd=ReleaseRandomness.from_seed(2),
        release_label="r",
    )
    assert "unique-value" not in fit.model.domain.labels[fit.model.domain.column_index("C")]


def test_too_large_is_refused_before_any_noise() -> None:
    """Above max_model_bytes fit raises naming the columns, and no noise stream was read."""
    rnd = ReleaseRandomness.from_seed(0)
    synth = create("mst", max_model_bytes=1000)
    with pytest.raises(SdsInputError, match=r"A \(6 values\) x B \(6 values\)"):
        synth.fit(prepare(_frame()), epsilon=1.0, delta=1e-6, rnd=rnd, release_label="r")
    assert rnd._label_stage == {}  # no noise label was touched
