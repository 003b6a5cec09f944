"""`sds plan`: a release's noise and cost from the header (or schema) only, nothing charged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sds_release.store.ledger.book import Ledger
from tests.helpers import PROJECT, run_cli

EXAMPLE = PROJECT / "examples" / "pums_ca_10k.csv"
CONFIG = PROJECT / "examples" / "release.toml"


@pytest.fixture
def header_only(tmp_path: Path) -> Path:
    """The bundled example's header line, then bytes no reader could parse as rows."""
    path = tmp_path / "header.csv"
    path.write_bytes(EXAMPLE.read_bytes().splitlines(keepends=True)[0] + b"\xff\xfe\x00bad\n")
    return path


def _plan(*args: str) -> tuple[int, dict, str]:
    code, out, err = run_cli("plan", *args, "--json")
    return code, (json.loads(out) if code == 0 else {}), err


def test_plan_reads_only_the_header_and_charges_nothing(header_only: Path, tmp_path: Path) -> None:
    """Per-length figures from a file whose rows are unreadable; no ledger row is written."""
    home = tmp_path / "home"
    Ledger.open(home).set_budget("pums-ca-10k", epsilon=20, delta=1e-5)
    before = Ledger.open(home).rows()
    code, plan, err = _plan(str(header_only), "--config", str(CONFIG), "--home", str(home))
    assert code == 0, err
    assert plan["charged"] is False and len(plan["columns"]) == 11
    lengths = plan["forecast"]["by_length"]
    # the SDS plan for N = 100,000 at ε = 4 (signal below 16,000): R = 2 and the model
    assert [x["length"] for x in lengths] == [1, 2]
    assert plan["sds_plan"]["reporting_length"] == 2 and plan["sds_plan"]["synthesis"] == "model"
    assert all(x["half_width_95"] > 0 and len(x["examples"]) == 3 for x in lengths)
    assert plan["records_from"] == "the schema's max_rows" and plan["records"] == 100_000
    assert plan["releases_left"] == 5  # ε = 20 left, ε = 4 a release
    assert Ledger.open(home).rows() == before


def test_plan_matches_the_release_that_follows(
    tiny_csv: Path, tiny_config: Path, tmp_path: Path, prefect_server: str
) -> None:
    """The length-1 noise of the plan equals the release's manifest for the Δ_1 it chose;
    afterwards the plan takes N from that release's DP record count."""
    home = tmp_path / "home"
    code, out, err = run_cli(
        "release",
        str(tiny_csv),
        "--config",
        str(tiny_config),
        "--home",
        str(home),
        "--quiet",
        "--release-id",
        "planned",
        "--seed",
        "5",
    )
    assert code == 0, err
    manifest = json.loads((Path(out.strip().splitlines()[-1]) / "manifest.json").read_text())
    code, plan, err = _plan(str(tiny_csv), "--config", str(tiny_config), "--home", str(home))
    assert code == 0, err
    released = manifest["privacy"]["noise"]["by_length"][0]
    planned = plan["forecast"]["by_length"][0]
    assert planned["sigma"] == pytest.approx(released["sigma"], rel=1e-12)
    scale = (released["allowed_sensitivity"] / planned["allowed_sensitivity_likely"]) ** 0.5
    assert planned["noise_sd"] * scale == pytest.approx(released["noise_sd"], rel=1e-12)
    assert plan["records"] == manifest["input"]["rows"]
    assert plan["records_from"] == "the DP record count of release planned"


def test_target_ci_and_records_option(header_only: Path, tmp_path: Path) -> None:
    """--target-ci gives an ε whose length-1 half-width meets it; --records is the N shown."""
    code, plan, err = _plan(
        str(header_only),
        "--config",
        str(CONFIG),
        "--home",
        str(tmp_path),
        "--target-ci",
        "25",
        "--records",
        "5000",
    )
    assert code == 0, err
    assert plan["forecast"]["by_length"][0]["half_width_95"] <= 25
    assert plan["records"] == 5000 and plan["records_from"] == "--records"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--target-ci", "0.001"), "no ε up to"),
        (("--records", "0"), "--records must be"),
        (("--epsilon", "-1"), "epsilon"),
    ],
)
def test_bad_plans_are_refused(
    header_only: Path, tmp_path: Path, args: tuple, message: str
) -> None:
    """An unmeetable target, a bad N or ε: one paragraph, exit 2."""
    code, _, err = run_cli(
        "plan", str(header_only), "--config", str(CONFIG), "--home", str(tmp_path), *args
    )
    assert code == 2 and message in err and err.startswith("sds: error:")


def test_runway_respects_the_policy(header_only: Path, tmp_path: Path) -> None:
    """A policy below the planned ε leaves no release; within it, remaining / ε."""
    Ledger.open(tmp_path).set_budget(
        "pums-ca-10k", epsilon=20, delta=1e-5, max_epsilon_per_release=2
    )
    base = (str(header_only), "--config", str(CONFIG), "--home", str(tmp_path))
    assert _plan(*base)[1]["releases_left"] == 0
    assert _plan(*base, "--epsilon", "2")[1]["releases_left"] == 10
