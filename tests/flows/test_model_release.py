"""Releases with the consistent model (synthesis = "model") and the mst and aim synthesizers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sds_core.data.domain import Domain
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.synthesis.consistent import AggregateNoise, estimated_total
from sds_release.store.ledger.book import Ledger
from tests.helpers import charges, complete_releases, run_cli


def _release(tiny_csv: Path, tiny_config: Path, home: Path, *extra: str) -> tuple[int, str, str]:
    """``sds release`` of the tiny table with seed 5 and the extra options."""
    return run_cli(
        "release",
        str(tiny_csv),
        "--config",
        str(tiny_config),
        "--home",
        str(home),
        "--seed",
        "5",
        "--quiet",
        *extra,
    )


AGGREGATE_FIELDS = ("length", "combination", "count", "noise_half_width_95")


def _published_one_way(path: Path, protected_n: int) -> AggregateSet:
    """The release's published 1-way counts (aggregates.parquet) as an aggregate set."""
    table = pd.read_parquet(path / "aggregates.parquet")
    one = table[table["length"] == 1]
    columns = [c for c in table.columns if c not in AGGREGATE_FIELDS]
    values: list[tuple[str, ...]] = []
    counts: list[int] = []
    for column in columns:
        rows = one[one[column].notna()]
        values.append(tuple(rows[column]))
        counts.extend(rows["count"])
    domain = Domain(tuple(columns), tuple(values))
    attrs = np.arange(len(counts), dtype=np.int32)[:, None]
    return AggregateSet(domain, 1, {1: CombinationCounts(attrs, np.array(counts))}, protected_n)


@pytest.mark.slow
def test_model_mode_release(
    tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    """synthesis = model: the same charges as SDS, records from the model, mode in the manifest."""
    code, out, err = _release(tiny_csv, tiny_config, home, "--synthesis", "model")
    assert code == 0, err
    path = Path(out.strip().splitlines()[-1])
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["parameters"]["synthesis"] == "model"
    noise = AggregateNoise.from_description(manifest["privacy"]["noise"])  # refittable
    assert len(noise.sigma_by_len) == len(noise.threshold_by_len) == 2
    assert [c.stage for c in charges(home)] == ["count", "aggregate-1", "aggregate-2"]
    synthetic = pd.read_csv(path / "synthetic.csv", dtype=str)
    # as many records as the model's total: the DP record count N̂ combined with the published
    # 1-way sums (sds_core.synthesis.consistent.estimated_total), recomputed here from the
    # published files alone. Both carry noise drawn anew for each release (N̂ sd 141, a
    # column's sum sd ~18), so the total is not compared with the true 400 more tightly
    # than 100 (N̂ alone, with no published sum, would be off by more than that one time in 3)
    assert noise.count_scale > 0
    total = estimated_total(_published_one_way(path, manifest["input"]["rows"]), noise)
    assert len(synthetic) == max(round(total), 1) and abs(total - 400) < 100


@pytest.mark.slow
def test_mst_release(tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str) -> None:
    """mst: three ledger stages adding up to ε; its measured 1-/2-way marginals are published."""
    code, out, err = _release(tiny_csv, tiny_config, home, "--synthesizer", "mst")
    assert code == 0, err
    path = Path(out.strip().splitlines()[-1])
    rows = charges(home)
    assert [c.stage for c in rows] == ["mst/one-way", "mst/select", "mst/two-way"]
    assert math.fsum(c.epsilon for c in rows) == pytest.approx(2.0)
    aggregates = pd.read_parquet(path / "aggregates.parquet")
    assert set(aggregates["length"]) == {1, 2}
    assert (aggregates["count"] > 0).all()


@pytest.mark.slow
def test_aim_release(tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str) -> None:
    """aim: two ledger stages (1-way, all rounds) adding up to ε; its measurements published.

    The release id is one whose records hold an age bin that aim's published 1-way counts omit
    (its re-measured 1-way marginal rounds that cell to <= 0): the output gate refused this
    release until it accepted aim's released domain (CI of f7c48f7)."""
    code, out, err = _release(
        tiny_csv,
        tiny_config,
        home,
        "--synthesizer",
        "aim",
        "--release-id",
        "2026-11-26T180123Z-f4798c",
    )
    assert code == 0, err
    path = Path(out.strip().splitlines()[-1])
    rows = charges(home)
    assert [c.stage for c in rows] == ["aim/one-way", "aim/rounds"]
    assert math.fsum(c.epsilon for c in rows) == pytest.approx(2.0)
    aggregates = pd.read_parquet(path / "aggregates.parquet")
    assert 1 in set(aggregates["length"])
    assert (aggregates["count"] > 0).all()


def test_model_too_large_is_refused_before_any_charge(
    tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    """A model above --max-model-bytes fails naming the columns; nothing is charged."""
    code, _, err = _release(
        tiny_csv, tiny_config, home, "--synthesizer", "mst", "--max-model-bytes", "500"
    )
    assert code != 0
    assert "max_model_bytes" in err and "values) x" in err and "Nothing was charged" in err
    assert charges(home) == [] and complete_releases(home) == []


def test_model_mode_needs_aggregate_seeded(tiny_csv: Path, tiny_config: Path, home: Path) -> None:
    """synthesis = model with another synthesizer is a parameter error, before any budget."""
    code, _, err = _release(
        tiny_csv, tiny_config, home, "--synthesizer", "mst", "--synthesis", "model"
    )
    assert code != 0 and "mode of the aggregate-seeded synthesizer" in err
    assert charges(home) == []


DP_BINS_CONFIG = """
dataset = "tiny-dp-bins"
epsilon = 2.0
reporting_length = 2
sensitive_zeros = ["sex", "married"]

[budget]
epsilon = 100.0
delta = 0.001

[schema]
min_rows = 10
max_rows = 100000

[[schema.columns]]
name = "sex"
values = ["0", "1"]

[[schema.columns]]
name = "age"
type = "integer"
min = 0
max = 120
bins = { dp_quantiles = 4 }

[[schema.columns]]
name = "educ"

[[schema.columns]]
name = "married"

[[schema.columns]]
name = "inc_cat"
"""


@pytest.mark.slow
def test_dp_quantile_bins_release(
    tiny_csv: Path, tmp_path: Path, home: Path, prefect_server: str
) -> None:
    """bins = { dp_quantiles = 4 }: a 'binning' charge of 5% of ε first, age released in bins."""
    config = tmp_path / "dp_bins.toml"
    config.write_text(DP_BINS_CONFIG)
    code, out, err = _release(tiny_csv, config, home)
    assert code == 0, err
    path = Path(out.strip().splitlines()[-1])
    rows = charges(home)
    assert rows[0].stage == "binning" and rows[0].epsilon == pytest.approx(0.1)
    assert math.fsum(c.epsilon for c in rows) == pytest.approx(2.0)
    ages = set(pd.read_csv(path / "synthetic.csv", dtype=str)["age"].dropna())
    assert ages and all("-" in a for a in ages)  # bin labels "lo-hi", not raw ages
    stages = [s["name"] for s in json.loads((path / "manifest.json").read_text())["stages"]]
    assert stages.index("binning") < stages.index("prepare")


def test_dp_quantiles_need_a_range() -> None:
    """dp_quantiles without min/max is a schema error naming the column and the fix."""
    from sds_core.errors import SdsInputError
    from sds_release.store.config import build_params

    schema = {"columns": [{"name": "age", "type": "integer", "bins": {"dp_quantiles": 4}}]}
    with pytest.raises(SdsInputError, match=r"'age': bins\.dp_quantiles needs a declared range"):
        build_params({"dataset": "d", "input": "x.csv", "table_schema": schema}, {})


def test_a_model_the_plan_may_pick_is_refused_before_any_charge(
    tiny_csv: Path, tiny_config: Path, tmp_path: Path, prefect_server: str
) -> None:
    """Synthesis left to the SDS plan, which may pick the model: a model above
    --max-model-bytes is refused before anything is reserved or charged (it failed in the
    synthesize stage, after every charge), saying how to rule the model out."""
    config = tmp_path / "planned.toml"
    config.write_text(tiny_config.read_text().replace('synthesis = "records"\n', ""))
    home = tmp_path / "home"
    code, _, err = _release(tiny_csv, config, home, "--max-model-bytes", "500")
    assert code != 0
    assert "may draw the records from the consistent model" in err
    assert "pin synthesis = 'records'" in err and "Nothing was charged" in err
    assert charges(home) == [] and complete_releases(home) == []
    assert Ledger.open(home).reservations("tiny") == []  # refused before the reservation
