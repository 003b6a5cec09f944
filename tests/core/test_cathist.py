"""Tests of the cathist synthesizer (Rodriguez & Howe, Algorithm 1 per column)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from synth_helpers import make_table, pums_table

from sds_core.dp.declared import DeclaredDomain, cathist_histogram, fidelity
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.synthesizers import create
from sds_core.synthesizers.cathist import CatHist, expected_random_values

DECLARED = (
    DeclaredDomain("sex", values=("F", "M"), size=171_000),
    DeclaredDomain("city", values=("Oslo", "Paris", "Rome")),
)


def _table():
    n = 900
    return make_table(
        {
            "sex": ["F" if i % 2 else "M" for i in range(n - 1)] + ["nonbinary"],
            "city": [("Oslo", "Rome", None)[i % 3] for i in range(n)],
        }
    )


def test_budget_is_pure_and_adds_up() -> None:
    """Count + one histogram per declared column, δ = 0, summing to ε."""
    spends = CatHist(declared=DECLARED).budget(1.5, None)
    assert [s.stage for s in spends] == [
        "cathist/count",
        "cathist/histogram/sex",
        "cathist/histogram/city",
    ]
    assert math.isclose(sum(s.epsilon for s in spends), 1.5)
    assert all(s.delta == 0 and s.rho is not None for s in spends)


def test_undeclared_values_only_in_private_notes() -> None:
    """A data value outside the declared domain is never released, only noted privately."""
    synth = create("cathist", declared=[{"column": "sex", "values": ["F", "M"]}, DECLARED[1]])
    for seed in range(5):
        fit = synth.fit(
            _table(),
            epsilon=4.0,
            delta=None,
            rnd=ReleaseRandomness.from_seed(seed),
            release_label="r",
        )
        published = json.dumps([fit.model.as_dict(), fit.privacy_report])
        assert "nonbinary" not in published
        assert "nonbinary" not in fit.model.domain.labels[0]
        assert fit.private_notes["sex"]["undeclared_values"] == ["nonbinary"]
    syn = synth.sample(None, rng=np.random.default_rng(0))
    assert abs(syn.n_records - 900) < 40
    assert syn.domain.labels[1] == ("Oslo", "Rome")  # Paris (count 0) did not pass at ε=4
    empties = np.mean(syn.codes[:, 1] == -1)
    assert empties == pytest.approx(1 / 3, abs=0.06)


def test_bad_inputs() -> None:
    """Missing declarations, unknown columns and ε ≤ 0 are refused with clear messages."""
    with pytest.raises(SdsInputError, match="cathist needs declared"):
        CatHist()
    with pytest.raises(SdsInputError, match="epsilon must be a finite number > 0"):
        CatHist(declared=DECLARED).budget(-1.0, None)
    with pytest.raises(SdsInputError, match="unknown column 'age'"):
        CatHist(declared=(DeclaredDomain("age", size=100),)).fit(
            _table(),
            epsilon=1.0,
            delta=None,
            rnd=ReleaseRandomness.from_seed(0),
            release_label="r",
        )
    with pytest.raises(SdsInputError, match="rho must be in"):
        CatHist(declared=DECLARED, rho=1.0)
    with pytest.raises(SdsInputError, match="bad declared domain"):
        CatHist(declared=[{"column": "sex", "vals": ["F"]}])


def test_expected_random_values_is_about_minus_ln_rho() -> None:
    """For large domains, E[#random values] ≈ -ln(rho) (slightly less: integer threshold)."""
    for rho in (0.1, 0.5, 0.9):
        e = expected_random_values(10**10, rho, 1.0)
        assert e <= -math.log(rho) + 1e-9
        assert e > -math.log(rho) * math.exp(-1.0) / 1.5


def test_fidelity_grows_with_rho_on_pums_sex(shared_data) -> None:
    """Paper Fig. 2 trend: higher rho ⇒ higher fidelity F for the sex column (English words)."""
    table = pums_table(shared_data, ["sex"])
    labels = table.domain.labels[0]
    exact = np.bincount(table.codes[:, 0], minlength=len(labels))
    true_counts = dict(zip(labels, exact.tolist(), strict=True))
    dec = DeclaredDomain("sex", values=labels, size=171_000)
    idx = np.arange(len(labels), dtype=np.int64)
    rnd = ReleaseRandomness.from_seed(7)
    for eps in (0.1, 1.0):
        means = []
        for rho in (0.1, 0.5, 0.9):
            fs = []
            for r in range(80):
                h = cathist_histogram(
                    dec,
                    idx,
                    exact,
                    epsilon=eps,
                    rho=rho,
                    rnd=rnd,
                    label=f"{eps}/{rho}/{r}",
                    stage="s",
                )
                fs.append(
                    fidelity(true_counts, dict(zip(h.labels, h.counts.tolist(), strict=True)))
                )
            means.append(float(np.mean(fs)))
        assert means[0] < means[1] < means[2], (eps, means)
        assert means[2] > 0.9
