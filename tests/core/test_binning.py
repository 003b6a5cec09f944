"""Tests of sds_core.data.binning: declared bins, labels, out-of-range policy and validation."""

from __future__ import annotations

import numpy as np
import pytest

from sds_core.data.binning import Binning, bin_strings, format_number
from sds_core.errors import SdsInputError


def test_edges_half_open_with_closed_last_bin() -> None:
    """Bins are [e_i, e_{i+1}); the last edge itself falls in the last bin."""
    b = Binning("age", edges=(20, 30, 90))
    x = np.array([20.0, 29.999, 30.0, 89.9, 90.0])
    assert b.labels_for(x).tolist() == ["20-30", "20-30", "30-90", "30-90", "30-90"]


def test_edges_out_of_range_go_to_open_bins() -> None:
    """Values outside the edges are not clipped: they get '<first' and '>last' bins."""
    b = Binning("age", edges=(20, 30, 90))
    assert b.labels_for(np.array([19.99, -5.0, 90.01, 1e9])).tolist() == [
        "<20",
        "<20",
        ">90",
        ">90",
    ]


def test_width_and_origin() -> None:
    """Width bins: floor((x - origin)/width), labelled by their bounds."""
    b = Binning("inc", width=2500, origin=100)
    x = np.array([100.0, 2599.0, 2600.0, 99.0, -5000.0])
    assert b.labels_for(x).tolist() == [
        "100-2600",
        "100-2600",
        "2600-5100",
        "-2400-100",
        "-7400--4900",
    ]
    f = Binning("r", width=0.1)
    assert f.labels_for(np.array([0.25, 0.35])).tolist() == ["0.2-0.3", "0.3-0.4"]


def test_number_format() -> None:
    """Integers print without '.0'; others with up to 12 significant digits."""
    assert [format_number(v) for v in (3.0, -0.5, 1 / 3, 1e20)] == [
        "3",
        "-0.5",
        "0.333333333333",
        "1e+20",
    ]


def test_bin_strings_flags_non_numbers() -> None:
    """bin_strings parses texts and masks non-finite or non-numeric ones."""
    labels, bad = bin_strings(Binning("x", edges=(0, 10)), ["1", "1e1", "abc", "inf", "-3"])
    assert bad.tolist() == [False, False, True, True, False]
    assert labels == ["0-10", "0-10", "", "", "<0"]


def test_edges_are_stored_as_float_tuple() -> None:
    """Edges given as ints or a list are stored as a tuple of floats (hashable, frozen)."""
    b = Binning("a", edges=[1, 2, 3])  # type: ignore[arg-type]
    assert b.edges == (1.0, 2.0, 3.0)
    assert hash(b) == hash(Binning("a", edges=(1.0, 2.0, 3.0)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"column": "", "width": 1}, "column must be a non-empty string"),
        ({"column": "a"}, "exactly one of edges= or width="),
        ({"column": "a", "edges": (0, 1), "width": 1}, "exactly one of edges= or width="),
        ({"column": "a", "edges": (1,)}, "at least 2 edges"),
        ({"column": "a", "edges": (0, 2, 2)}, "strictly ascending"),
        ({"column": "a", "edges": (0, float("inf"))}, "finite and strictly ascending"),
        ({"column": "a", "width": 0}, "width of column 'a' must be finite and > 0"),
        ({"column": "a", "width": float("nan")}, "must be finite and > 0"),
        (
            {"column": "a", "width": 1, "origin": float("inf")},
            "origin of column 'a' must be finite",
        ),
    ],
)
def test_binning_validation(kwargs: dict[str, object], match: str) -> None:
    """Invalid bin declarations raise SdsInputError naming the column and the rule."""
    with pytest.raises(SdsInputError, match=match):
        Binning(**kwargs)  # type: ignore[arg-type]
