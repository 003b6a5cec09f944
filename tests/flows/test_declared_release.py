"""Declared schema values reach the SDS engine's 1-tuple step (DpParams.declared_domains)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pandas as pd
import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config import build_params, load_config
from sds_release.store.config.core_objects import declared_domains, dp_params, synthesizer_domains
from tests.helpers import run_cli

DECLARED_COLUMNS = "sex,educ,married,inc_cat"


def _params(tiny_config: Path, tiny_csv: Path, **overrides: object):
    return build_params(load_config(tiny_config), {"input": str(tiny_csv), **overrides})


def test_declared_domains_follow_the_schema(tiny_config: Path, tiny_csv: Path) -> None:
    """All used columns with values ⇒ one DeclaredDomain each; a binned column ⇒ none."""
    params = _params(tiny_config, tiny_csv, use_columns=DECLARED_COLUMNS.split(","))
    declared = {d.column: d for d in declared_domains(params)}
    assert list(declared) == ["sex", "educ", "married", "inc_cat"]
    assert declared["sex"].values == ("0", "1")  # sensitive zero: "0" is a value
    assert "0" not in declared["educ"].values and len(declared["educ"].values) == 16
    assert dp_params(params).declared_domains == tuple(declared.values())
    assert declared_domains(_params(tiny_config, tiny_csv)) == ()  # age is binned


def test_cathist_domains_include_declared_bins(tiny_config: Path, tiny_csv: Path) -> None:
    """cathist releases every column: a binned column's domain is its bins over [min, max]."""
    params = _params(tiny_config, tiny_csv, synthesizer="cathist")
    domains = {d.column: d.values for d in synthesizer_domains(params)}
    assert list(domains) == ["sex", "age", "educ", "married", "inc_cat"]
    assert domains["age"] == ("0-30", "30-50", "50-70", "70-121")
    assert domains["sex"] == ("0", "1") and "0" not in domains["educ"]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("bins = { edges = [0, 30, 50, 70, 121] }", "bins = { dp_quantiles = 4 }",
         "bins.dp_quantiles chooses them during the release"),
        ("min = 0\nmax = 120\nbins = { edges = [0, 30, 50, 70, 121] }", "bins = { width = 10 }",
         "give the column a min and a max"),
        ('values = ["0", "1"]\nnullable = false', "nullable = false",
         "column 'sex' declares none"),
        ("max_rows = 100000", "max_rows = 100000\nallow_extra_columns = true",
         "use_columns"),
    ],
)  # fmt: skip
def test_cathist_refuses_columns_without_a_declared_domain(
    tiny_config: Path, tiny_csv: Path, tmp_path: Path, old: str, new: str, message: str
) -> None:
    """A column whose domain the schema does not fix is refused at planning, naming it."""
    text = tiny_config.read_text()
    assert old in text
    cfg = tmp_path / "c.toml"
    cfg.write_text(text.replace(old, new, 1))
    params = build_params(load_config(cfg), {"input": str(tiny_csv), "synthesizer": "cathist"})
    with pytest.raises(SdsInputError, match=message):
        synthesizer_domains(params)


def test_declared_release_publishes_only_declared_labels(
    tiny_csv: Path, tiny_config: Path, tmp_path: Path, prefect_server: str
) -> None:
    """The flow runs stage by stage on the released domain; outputs use declared values only."""
    home = tmp_path / "home"
    cfg = tmp_path / "declared.toml"
    cfg.write_text(
        tiny_config.read_text().replace('"above 150k"]', '"above 150k", "not-in-the-data"]')
    )
    code, out, err = run_cli(
        "release",
        str(tiny_csv),
        "--config",
        str(cfg),
        "--home",
        str(home),
        "--use-columns",
        DECLARED_COLUMNS,
        "--seed",
        "4",
        "--quiet",
    )
    assert code == 0, err
    release = Path(out.strip().splitlines()[-1])
    m = json.loads((release / "manifest.json").read_text())
    assert m["status"] == "complete"
    schema = load_config(cfg)["table_schema"]
    allowed = {c["name"]: set(c.get("values", ())) | {""} for c in schema["columns"]}
    assert "not-in-the-data" in allowed["inc_cat"]
    syn = pd.read_csv(release / "synthetic.csv", dtype=str, keep_default_na=False)
    for col in syn.columns:
        assert set(syn[col]) <= allowed[col], col
    ckpt = next(home.glob("private/**/aggregate-1.pkl"))
    step1 = pickle.loads(ckpt.read_bytes())
    assert step1["domain"] is not None and step1["domain"].columns == tuple(syn.columns)
    assert run_cli("audit", "--verify", "--home", str(home))[0] == 0
