"""The control rows a ``privacy_risk`` release holds back: keyed, whole subjects, a minimum."""

from __future__ import annotations

import pyarrow as pa
import pytest

from release_store.config.release_params import ReleaseParams
from release_store.inputs.holdback import (
    CONTROL_SHARE,
    MIN_SIDE_ROWS,
    check_holdback,
    hold_back,
    min_input_units,
)
from sds_core.errors import SdsInputError


def _rows(n: int, subjects: int | None = None) -> pa.Table:
    """``n`` rows numbered ``i``; when asked, a subject id cycling over ``subjects``."""
    cols = {"i": [str(i) for i in range(n)], "v": [str(i % 7) for i in range(n)]}
    if subjects is not None:
        cols["pid"] = [f"P{i % subjects}" for i in range(n)]
    return pa.table(cols)


def test_split_is_the_share_keyed_and_covers_the_input() -> None:
    """20% of the rows held back, the rest released, disjoint; same key same cut, other key not."""
    table = _rows(1000)
    training, control = hold_back(table, seed=11, subject_id=None)
    assert control.num_rows == round(1000 * CONTROL_SHARE) == 200
    assert training.num_rows == 800
    t, c = set(training.column("i").to_pylist()), set(control.column("i").to_pylist())
    assert not t & c and t | c == set(table.column("i").to_pylist())
    again = hold_back(table, seed=11, subject_id=None)
    assert again[1].equals(control) and again[0].equals(training)
    assert not hold_back(table, seed=12, subject_id=None)[1].equals(control)


def test_subjects_stay_whole() -> None:
    """With a subject id every subject's rows are on one side, and 20% of the subjects are held
    back (ids matched trimmed and case-insensitively, as the release joins them)."""
    table = _rows(2000, subjects=600)
    pids = [p if i % 2 else f" {p.lower()} " for i, p in enumerate(table.column("pid").to_pylist())]
    table = table.set_column(2, "pid", pa.array(pids))
    training, control = hold_back(table, seed=3, subject_id="PID")

    def ids(t: pa.Table) -> set[str]:
        return {p.strip().lower() for p in t.column("pid").to_pylist()}

    assert not ids(training) & ids(control)
    assert len(ids(control)) == 120 and len(ids(training)) == 480


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
    """498 rows (subjects) leave 100 on each side; one fewer is refused, naming the minimum."""
    table = _rows(rows, subjects)
    subject_id = None if subjects is None else "pid"
    if not refused:
        check_holdback(table, subject_id)
        assert min(t.num_rows for t in hold_back(table, seed=1, subject_id=subject_id)) > 0
        return
    unit = "subjects" if subjects else "rows"
    with pytest.raises(SdsInputError, match=rf"each needs at least {MIN_SIDE_ROWS}") as err:
        hold_back(table, seed=1, subject_id=subject_id)
    assert f"needs at least {min_input_units()} {unit}" in str(err.value)
    assert "Nothing was charged or written" in str(err.value)


def test_the_parameter_states_the_share_and_the_minimum() -> None:
    """privacy_risk's description (form, CLI help, docs table) gives the share and the minimum
    the hold-back uses, so the one declaration cannot drift from the code."""
    text = ReleaseParams.model_fields["privacy_risk"].description or ""
    assert f"{CONTROL_SHARE:.0%}" in text and f"at least {min_input_units()} rows" in text


def test_privacy_risk_refuses_the_dask_executor() -> None:
    """The hold-back and anonymeter run in the flow's process: executor dask is refused."""
    with pytest.raises(ValueError, match=r"privacy_risk = true .* executor 'dask'"):
        ReleaseParams(input="x.csv", dataset="d", privacy_risk=True, executor="dask")
