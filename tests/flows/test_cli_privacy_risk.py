"""`sds split` and `sds evaluate --privacy-risk` on the command line: refusals, private files."""

from __future__ import annotations

import csv
import json
import stat
from pathlib import Path

import pytest

from tests.helpers import anonymeter_env, run_cli


def _csv(path: Path, n: int) -> Path:
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(
            [["a", "b", "c"], *([f"a{i % 13}", f"b{i % 7}", f"c{i % 5}"] for i in range(n))]
        )
    return path


def test_split_command_writes_two_private_files(tmp_path: Path) -> None:
    """`sds split` prints both paths (training last) and writes them 0600."""
    code, out, err = run_cli(
        "split", str(_csv(tmp_path / "in.csv", 600)), "--out-dir", str(tmp_path / "s"),
        "--seed", "1",
    )  # fmt: skip
    assert code == 0, err
    assert out.strip().splitlines()[-1].endswith(str(tmp_path / "s" / "training.csv"))
    for name in ("training.csv", "control.csv"):
        assert stat.S_IMODE((tmp_path / "s" / name).stat().st_mode) == 0o600


def test_split_command_refuses_a_small_input(tmp_path: Path) -> None:
    """Too small for a control split: exit 2, the minimum named, no directory made."""
    code, _, err = run_cli(
        "split", str(_csv(tmp_path / "in.csv", 300)), "--out-dir", str(tmp_path / "s")
    )
    assert code == 2 and "at least 100" in err and "Nothing was charged" in err
    assert not (tmp_path / "s").exists()


def test_privacy_risk_needs_a_control_set(tmp_path: Path) -> None:
    """--privacy-risk without --control (or the reverse) is refused naming `sds split`."""
    data = str(_csv(tmp_path / "in.csv", 200))
    for extra in (["--privacy-risk"], ["--control", data]):
        code, _, err = run_cli("evaluate", data, data, *extra)
        assert code == 2 and "sds split" in err


def test_output_inside_a_release_directory_is_refused(tmp_path: Path) -> None:
    """The evaluation is never written into a published release directory."""
    release = tmp_path / "home" / "releases" / "ds" / "r1"
    release.mkdir(parents=True)
    (release / "manifest.json").write_text("{}")
    data = str(_csv(tmp_path / "in.csv", 200))
    code, _, err = run_cli("evaluate", data, data, "--output", str(release / "risk.json"))
    assert code == 2 and "published" in err
    assert not (release / "risk.json").exists()


@pytest.mark.slow  # ~10 s: one anonymeter job
def test_evaluate_privacy_risk_writes_a_private_result(tmp_path: Path) -> None:
    """split, then evaluate the training rows as 'synthetic': risks in the JSON, file 0600."""
    anonymeter_env()
    code, _, err = run_cli(
        "split", str(_csv(tmp_path / "in.csv", 600)), "--out-dir", str(tmp_path / "s"),
        "--seed", "1",
    )  # fmt: skip
    assert code == 0, err
    training, control = tmp_path / "s" / "training.csv", tmp_path / "s" / "control.csv"
    out = tmp_path / "private" / "risk.json"
    code, text, err = run_cli(
        "evaluate", str(training), str(training), "--privacy-risk", "--control", str(control),
        "--n-attacks", "40", "--secrets", "c", "--output", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert "NOT differentially private" in text and "singling out (multivariate)" in text
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    risk = json.loads(out.read_text())["privacy_risk"]
    assert risk["params"]["n_attacks"] == 40 and set(risk["inference"]) == {"c"}
    assert 0.0 <= risk["linkability"]["risk"] <= 1.0
