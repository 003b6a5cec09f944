"""`sds evaluate --privacy-risk`: anonymeter run in its own environment on private files."""

from __future__ import annotations

import csv
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from sds_core.errors import SdsInputError
from sds_release.store.compare import RiskParams, privacy_risk
from sds_release.store.compare.risk import ANONYMETER_PYTHON_ENV
from tests.helpers import anonymeter_env

HEADER = ["a", "b", "c", "d"]


def _tables(tmp_path: Path, n_training: int, n_control: int) -> tuple[Path, Path]:
    """Training and control CSVs drawn from one population of 4 categorical columns."""
    rng = np.random.default_rng(0)
    rows = np.stack(
        [rng.integers(0, k, size=n_training + n_control) for k in (20, 15, 10, 4)], axis=1
    )
    paths = tmp_path / "training.csv", tmp_path / "control.csv"
    for path, part in zip(paths, (rows[:n_training], rows[n_training:]), strict=True):
        with path.open("w", newline="") as f:
            csv.writer(f).writerows([HEADER, *([f"v{x}" for x in r] for r in part)])
    return paths


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary directory the evaluation writes its private copies under."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_too_small_for_a_control_split_is_refused(
    tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A control set of 60 rows is refused naming the minimum, before any file is written."""
    monkeypatch.setenv(ANONYMETER_PYTHON_ENV, sys.executable)  # exists: the size rule decides
    training, control = _tables(tmp_path, 300, 60)
    with pytest.raises(SdsInputError, match=r"control side 60; each needs at least 100"):
        privacy_risk(training, training, control)
    assert list(private_tmp.iterdir()) == []


def test_missing_environment_names_make_anonymeter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without anonymeter's environment the evaluation says how to make it."""
    monkeypatch.setenv(ANONYMETER_PYTHON_ENV, str(tmp_path / "no" / "python"))
    training, control = _tables(tmp_path, 300, 150)
    with pytest.raises(SdsInputError, match=r"run `make anonymeter`"):
        privacy_risk(training, training, control)


def test_unknown_secret_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret that is no column of the tables is refused naming the columns."""
    monkeypatch.setenv(ANONYMETER_PYTHON_ENV, sys.executable)
    training, control = _tables(tmp_path, 300, 150)
    with pytest.raises(SdsInputError, match=r"column 'zz' .* is not a column"):
        privacy_risk(training, training, control, params=RiskParams(secrets=("zz",)))


@pytest.mark.slow  # ~10 s: anonymeter's import and its kNN kernel's numba compilation
def test_real_anonymeter_on_a_tiny_table(tmp_path: Path, private_tmp: Path) -> None:
    """anonymeter 1.1.0 in its venv: records copied from the training rows single them out far
    more often than the control rows (a clear risk), and the private copies are removed."""
    anonymeter_env()
    training, control = _tables(tmp_path, 300, 150)
    params = RiskParams(n_attacks=60, secrets=("d",))
    copied = privacy_risk(training, training, control, params=params)
    assert copied["anonymeter"] == "1.1.0" and copied["differentially_private"] is False
    assert copied["records"] == {"training": 300, "control": 150, "synthetic": 300}
    multi = copied["singling_out"]["multivariate"]
    assert multi["attack_rate"]["value"] > 0.9 > 0.5 > multi["control_rate"]["value"]
    assert multi["informative"] and multi["risk"] > 0.5
    lo, hi = multi["ci"]
    assert 0.0 <= lo <= multi["risk"] <= hi <= 1.0
    assert copied["linkability"]["n_attacks"] == [60, 60, 60]
    assert set(copied["inference"]) == {"d"} and copied["inference_max"]["secret"] == "d"
    assert list(private_tmp.iterdir()) == []
