"""`sds split`: the control rows held back before a release, and the too-small refusal."""

from __future__ import annotations

import csv
import stat
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sds_core.errors import SdsInputError
from sds_release.store.compare import MIN_SIDE_ROWS, split_input
from sds_release.store.compare.split import check_side_sizes, control_mask


def _write(path: Path, n: int, *, subjects: int | None = None) -> list[list[str]]:
    """A CSV of ``n`` rows (pid, a, b; a value with the delimiter, so quoting is exercised)."""
    rows = [
        [f"P{i % subjects if subjects else i}", str(i % 7), "x,y" if i % 5 == 0 else f"b{i % 3}"]
        for i in range(n)
    ]
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([["pid", "a", "b"], *rows])
    return rows


def _read(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        header, *rows = csv.reader(f)
    assert header == ["pid", "a", "b"]
    return rows


def test_control_mask_share_and_seeded() -> None:
    """Each row is held back with the share's chance (about n·share rows); the same seed repeats
    the split, another does not."""
    table = pa.table({"i": [str(i) for i in range(10_000)]})
    a = control_mask(table, 0.2, seed=3)
    assert abs(int(a.sum()) - 2000) < 4 * 40  # Binomial(10000, 0.2): sd 40
    assert np.array_equal(a, control_mask(table, 0.2, seed=3))
    assert not np.array_equal(a, control_mask(table, 0.2, seed=4))


@pytest.mark.parametrize("share", [0.0, 1.0, -0.1, 1.5])
def test_control_share_must_be_a_fraction(share: float) -> None:
    """A share outside (0, 1) is refused naming the option and the value."""
    with pytest.raises(SdsInputError, match=r"--control-share must be between 0 and 1"):
        control_mask(pa.table({"i": ["1"]}), share, seed=0)


def test_split_partitions_the_rows_privately(tmp_path: Path) -> None:
    """Training and control are disjoint, together the input in order, each file 0600."""
    rows = _write(tmp_path / "in.csv", 1000)
    files = split_input(tmp_path / "in.csv", tmp_path / "out", control_share=0.25, seed=1)
    training, control = _read(files.training), _read(files.control)
    assert (files.training_rows, files.control_rows) == (len(training), len(control))
    assert abs(len(control) - 250) < 4 * 14 and len(training) + len(control) == 1000
    assert sorted(training + control) == sorted(rows)
    assert training == [r for r in rows if r in training]  # input order kept
    for path in (files.training, files.control):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o700
    again = split_input(tmp_path / "in.csv", tmp_path / "again", control_share=0.25, seed=1)
    assert _read(again.control) == control


def test_split_by_subject_keeps_a_person_on_one_side(tmp_path: Path) -> None:
    """With --subject-id every subject's rows are all training or all control."""
    _write(tmp_path / "in.csv", 3000, subjects=1000)
    files = split_input(
        tmp_path / "in.csv", tmp_path / "out", control_share=0.2, seed=2, subject_id="PID"
    )
    training = {r[0] for r in _read(files.training)}
    control = {r[0] for r in _read(files.control)}
    assert training.isdisjoint(control) and len(control) + len(training) == 1000
    assert abs(len(control) - 200) < 4 * 13  # Binomial(1000, 0.2): sd 12.6


def test_too_small_for_a_control_split_is_refused(tmp_path: Path) -> None:
    """An input whose control side would hold < 100 rows is refused, nothing written."""
    _write(tmp_path / "in.csv", 400)
    with pytest.raises(SdsInputError, match=r"control side \d\d; each needs at least 100"):
        split_input(tmp_path / "in.csv", tmp_path / "out", control_share=0.2, seed=0)
    assert not (tmp_path / "out").exists()


def test_an_existing_split_is_never_overwritten(tmp_path: Path) -> None:
    """A second split into the same directory is refused: its rows may be released already."""
    _write(tmp_path / "in.csv", 600)
    split_input(tmp_path / "in.csv", tmp_path / "out", seed=0)
    with pytest.raises(SdsInputError, match=r"already exists"):
        split_input(tmp_path / "in.csv", tmp_path / "out", seed=1)


def test_side_sizes_rule() -> None:
    """check_side_sizes accepts the minimum and refuses one less on either side."""
    check_side_sizes(MIN_SIDE_ROWS, MIN_SIDE_ROWS)
    for sizes in ((MIN_SIDE_ROWS - 1, 1000), (1000, MIN_SIDE_ROWS - 1)):
        with pytest.raises(SdsInputError, match=r"too small for a privacy-risk evaluation"):
            check_side_sizes(*sizes)
