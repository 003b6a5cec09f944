"""The default release: the SDS plan chooses R, the split and the synthesis from the DP record
count (stage ``plan``), within the budget reserved before the data was read (issue 22)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sds_release.store.ledger.book import Ledger
from tests.helpers import TINY_CONFIG, charges, run_cli

RID = "planned"


@pytest.fixture(scope="module")
def planned(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, prefect_server: str
) -> tuple[Path, Path]:
    """A release of the tiny data whose config leaves reporting_length and synthesis empty;
    returns (home, release directory)."""
    root = tmp_path_factory.mktemp("planned")
    config = root / "planned.toml"
    config.write_text(
        TINY_CONFIG.replace("reporting_length = 2\n", "").replace('synthesis = "records"\n', "")
    )
    home = root / "home"
    code, out, err = run_cli(
        "release", str(tiny_csv), "--config", str(config), "--home", str(home),
        "--release-id", RID, "--seed", "5", "--quiet",
    )  # fmt: skip
    assert code == 0, err
    return home, Path(out.strip().splitlines()[-1])


def test_the_plan_is_published_with_its_reason(planned: tuple[Path, Path]) -> None:
    """400 records at ε = 2: R = 2 and the consistent model, chosen (not set) and said why;
    the published parameters are the ones the release ran with, the report says the reason."""
    _, released = planned
    m = json.loads((released / "manifest.json").read_text())
    plan = m["plan"]
    assert plan["reporting_length"] == 2 and plan["synthesis"] == "model"
    assert set(plan["chosen"]) == {"reporting_length", "sigma_proportions", "synthesis"}
    assert plan["protected_number_of_records"] == m["input"]["rows"]  # the DP count, no other
    assert m["parameters"]["reporting_length"] == 2 and m["parameters"]["synthesis"] == "model"
    assert m["parameters"]["sigma_proportions"] == plan["sigma_proportions"]
    names = [s["name"] for s in m["stages"]]
    assert names[names.index("count") + 1] == "plan" and "aggregate-3" not in names
    assert [x["length"] for x in m["privacy"]["noise"]["by_length"]] == [1, 2]
    assert plan["reason"] in (released / "report.html").read_text()


def test_the_ledger_revises_the_stages_within_the_reserved_total(
    planned: tuple[Path, Path],
) -> None:
    """Reserved with the provisional R = 3 plan, revised by one chained ``plan`` row to the
    lengths the plan chose; the charges are those stages and sum to the release's ε."""
    home, _ = planned
    ledger = Ledger.open(home)
    res = ledger.reservation(RID)
    assert res is not None and res.status == "completed"
    assert [p.stage for p in res.initial_plan] == ["count", "aggregate-1", "aggregate-2",
                                                    "aggregate-3"]  # fmt: skip
    assert [p.stage for p in res.planned] == ["count", "aggregate-1", "aggregate-2"]
    assert [r["kind"] for r in ledger.rows() if r["release_id"] == RID].count("plan") == 1
    rows = charges(home)
    assert [r.stage for r in rows] == ["count", "aggregate-1", "aggregate-2"]
    assert math.isclose(math.fsum(r.epsilon for r in rows), 2.0, rel_tol=1e-9)
    assert run_cli("audit", "--verify", "--home", str(home))[0] == 0


def test_a_planned_release_replays_identically(planned: tuple[Path, Path], tiny_csv: Path) -> None:
    """The replay starts from the parameters as configured (the chosen ones empty again),
    plans again from its DP count and finds every stage, the plan included, identical."""
    home, _ = planned
    code, out, err = run_cli(
        "audit", RID, "--replay", "--input", str(tiny_csv), "--home", str(home), "--json"
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["identical"], [c for c in report["checks"] if c["status"] != "match"]
    assert any(c["stage"] == "plan" for c in report["checks"])


def test_a_set_reporting_length_and_synthesis_are_kept(
    tiny_csv: Path, tiny_config: Path, tmp_path: Path, prefect_server: str
) -> None:
    """With both set (the tiny config: R = 2, records) nothing is chosen and no plan row is
    written: the reservation's stages are the charged ones."""
    home = tmp_path / "home"
    code, out, err = run_cli(
        "release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home),
        "--release-id", "kept", "--seed", "5", "--quiet",
    )  # fmt: skip
    assert code == 0, err
    m = json.loads((Path(out.strip().splitlines()[-1]) / "manifest.json").read_text())
    assert m["plan"]["chosen"] == [] and m["parameters"]["synthesis"] == "records"
    ledger = Ledger.open(home)
    assert "plan" not in [r["kind"] for r in ledger.rows()]
