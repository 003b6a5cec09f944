"""The control rows a ``privacy_risk`` release holds back: one keyed coin per row or subject
(Poisson), so neighbouring inputs differ by one unit on one side; whole subjects; a minimum."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.inputs import holdback
from sds_release.store.inputs.holdback import (
    CONTROL_SHARE,
    check_holdback,
    control_mask,
    hold_back,
    min_input_units,
)


def _rows(n: int, subjects: int | None = None) -> pa.Table:
    """``n`` rows numbered ``i``; when asked, a subject id cycling over ``subjects``."""
    cols = {"i": [str(i) for i in range(n)], "v": [str(i % 7) for i in range(n)]}
    if subjects is not None:
        cols["pid"] = [f"P{i % subjects}" for i in range(n)]
    return pa.table(cols)


def _ids(table: pa.Table) -> Counter[str]:
    return Counter(table.column("i").to_pylist())


def test_split_is_the_share_keyed_and_covers_the_input() -> None:
    """About 20% of the rows held back (each by its coin), the rest released, disjoint; same
    key same cut, other key another cut of another size."""
    table = _rows(10_000)
    training, control = hold_back(table, seed=11, subject_id=None)
    assert abs(control.num_rows - 2000) < 4 * 40  # Binomial(10000, 0.2): sd 40
    assert training.num_rows + control.num_rows == 10_000
    t, c = set(training.column("i").to_pylist()), set(control.column("i").to_pylist())
    assert not t & c and t | c == set(table.column("i").to_pylist())
    again = hold_back(table, seed=11, subject_id=None)
    assert again[1].equals(control) and again[0].equals(training)
    other = hold_back(table, seed=12, subject_id=None)[1]
    assert other.num_rows != control.num_rows  # Poisson: the size is random too


def test_subjects_stay_whole() -> None:
    """With a subject id every subject's rows are on one side, and about 20% of the subjects
    are held back (ids matched trimmed and case-insensitively, as the release joins them)."""
    table = _rows(6000, subjects=2000)
    pids = [p if i % 2 else f" {p.lower()} " for i, p in enumerate(table.column("pid").to_pylist())]
    table = table.set_column(2, "pid", pa.array(pids))
    training, control = hold_back(table, seed=3, subject_id="PID")

    def ids(t: pa.Table) -> set[str]:
        return {p.strip().lower() for p in t.column("pid").to_pylist()}

    assert not ids(training) & ids(control)
    assert len(ids(control)) + len(ids(training)) == 2000
    assert abs(len(ids(control)) - 400) < 4 * 18  # Binomial(2000, 0.2): sd 17.9


def _neighbours(n: int, at: int, x: dict[str, str]) -> tuple[pa.Table, pa.Table]:
    """D (``n`` rows of three columns, with duplicates) and D + x, x inserted at row ``at``."""
    cols = {"i": [str(i % (n // 3)) for i in range(n)], "v": [str(i % 5) for i in range(n)]}
    cols["w"] = [f"w{i % 2}" for i in range(n)]
    d = pa.table(cols)
    rows = d.to_pylist()
    return d, pa.Table.from_pylist([*rows[:at], x, *rows[at:]], schema=d.schema)


def _multiset(table: pa.Table) -> Counter[tuple[str, ...]]:
    return Counter(tuple(r.values()) for r in table.to_pylist())


@pytest.mark.parametrize(
    ("at", "x"),
    [
        (0, {"i": "new", "v": "9", "w": "w9"}),  # a row unlike any other, first
        (500, {"i": "new", "v": "9", "w": "w9"}),  # the same row in the middle
        (0, {"i": "7", "v": "2", "w": "w1"}),  # a copy of rows already there, before them
        (999, {"i": "7", "v": "2", "w": "w1"}),  # the same copy, last
    ],
)
def test_neighbouring_inputs_differ_by_the_added_row_only(at: int, x: dict[str, str]) -> None:
    """For D and D + x (x anywhere, new or a copy of other rows), every unit of D keeps its
    coin: the training parts differ by x at most, and so do the control parts, for every key."""
    d, d_x = _neighbours(999, at, x)
    row = tuple(x.values())
    for seed in range(20):
        t, c = (_multiset(side) for side in hold_back(d, seed=seed, subject_id=None))
        t_x, c_x = (_multiset(side) for side in hold_back(d_x, seed=seed, subject_id=None))
        assert (t_x - t) + (c_x - c) == Counter([row]), seed  # x went to one side
        assert not (t - t_x) and not (c - c_x), seed  # nothing of D moved


def test_an_added_subject_moves_no_other_subject() -> None:
    """With a subject id, adding a subject (all its rows) leaves every other subject's side."""
    d = _rows(3000, subjects=1000)
    extra = pa.table({"i": ["a", "b", "c"], "v": ["1", "2", "3"], "pid": ["new"] * 3})
    d_x = pa.concat_tables([d.slice(0, 1500), extra, d.slice(1500)])
    for seed in range(10):
        held = control_mask(d, CONTROL_SHARE, seed, subject_id="pid")
        held_x = control_mask(d_x, CONTROL_SHARE, seed, subject_id="pid")
        assert np.array_equal(np.delete(held_x, [1500, 1501, 1502]), held)
        assert len(set(held_x[1500:1503].tolist())) == 1  # the new subject: one coin


def test_row_order_moves_no_unit() -> None:
    """The same rows in another order are cut into the same training and control rows."""
    table = _rows(2000)
    shuffled = table.take(np.random.default_rng(0).permutation(2000))
    for seed in range(5):
        cut = [_ids(side) for side in hold_back(table, seed=seed, subject_id=None)]
        assert cut == [_ids(side) for side in hold_back(shuffled, seed=seed, subject_id=None)]


@pytest.mark.parametrize(
    ("rows", "subjects", "refused"),
    [
        (min_input_units(), None, False),
        (min_input_units() - 1, None, True),
        (5000, min_input_units() - 1, True),  # plenty of rows, too few subjects
        (5000, min_input_units(), False),
    ],
)
def test_minimum_size(rows: int, subjects: int | None, refused: bool) -> None:
    """746 rows (subjects) leave 100 on each side but with chance 1e-6; one fewer is refused,
    naming the minimum, before any coin is drawn."""
    table = _rows(rows, subjects)
    subject_id = None if subjects is None else "pid"
    if not refused:
        check_holdback(table, subject_id)
        assert min(t.num_rows for t in hold_back(table, seed=1, subject_id=subject_id)) > 0
        return
    unit = "subjects" if subjects else "rows"
    with pytest.raises(SdsInputError, match=rf"the input has {min_input_units() - 1} {unit}"):
        check_holdback(table, subject_id)
    with pytest.raises(SdsInputError, match=rf"needs at least {min_input_units()} {unit}") as err:
        hold_back(table, seed=1, subject_id=subject_id)
    assert "Nothing was charged or written" in str(err.value)


def test_a_short_realised_side_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The coins decide the sizes: a cut whose control side holds fewer than 100 rows is
    refused naming both sizes, though the input passed the minimum."""
    monkeypatch.setattr(holdback, "min_input_units", lambda: 500)
    table = _rows(500)
    short = next(s for s in range(100) if control_mask(table, CONTROL_SHARE, s).sum() < 100)
    n_control = int(control_mask(table, CONTROL_SHARE, short).sum())
    with pytest.raises(SdsInputError, match=rf"control side {n_control}; each needs at least 100"):
        hold_back(table, seed=short, subject_id=None)


def test_the_parameter_states_the_share_and_the_minimum() -> None:
    """privacy_risk's description (form, CLI help, docs table) gives the share and the minimum
    the hold-back uses, so the one declaration cannot drift from the code."""
    text = ReleaseParams.model_fields["privacy_risk"].description or ""
    assert f"{CONTROL_SHARE:.0%}" in text and f"at least {min_input_units()} rows" in text


def test_privacy_risk_refuses_the_dask_executor() -> None:
    """The hold-back and anonymeter run in the flow's process: executor dask is refused."""
    with pytest.raises(ValueError, match=r"privacy_risk = true .* executor 'dask'"):
        ReleaseParams(input="x.csv", dataset="d", privacy_risk=True, executor="dask")
