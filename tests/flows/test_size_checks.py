"""The synthesis is sized before the first charge, for whatever the SDS plan may pick: the
records' limits (combination keys, candidate memory) and the consistent model's worst case,
from the declared schema when it bounds every column, else from the data before any charge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sds_core.data.preparation import prepare
from sds_core.errors import SdsInputError
from sds_release.store.config import build_params
from sds_release.store.config.core_objects import prepare_params
from sds_release.store.executor.local import LocalExecutor
from sds_release.store.ledger.book import Ledger
from sds_release.store.run.release_run import ReleaseRun, SensitiveTable, reserve
from sds_release.tasks.budget import reserve_budget
from sds_release.tasks.marginals import count_records
from sds_release.tasks.preparation import choose_bins

N = 2000


def _params(home: Path, **extra: Any) -> Any:
    """A release of columns a (N values, one per row), b and c (2 values each), ε 4."""
    values = {
        "dataset": "wide",
        "input": "wide.csv",
        "home": str(home),
        "epsilon": 4.0,
        "seed": 3,
        "release_id": "r1",
        "use_columns": ["a", "b", "c"],
        "default_budget": {"epsilon": 100.0, "delta": 1e-3},
    }
    return build_params(values | extra, {})


def _table() -> pa.Table:
    return pa.table(
        {
            "a": [f"a{i}" for i in range(N)],
            "b": [str(i % 2) for i in range(N)],
            "c": [f"c{i % 2}" for i in range(N)],
        }
    )


def _nothing_charged(run: ReleaseRun) -> None:
    assert Ledger.open(run.home).charges(release_id=run.release_id) == []


def _counted(run: ReleaseRun) -> Any:
    prepared = prepare(_table(), prepare_params(run.params, None, ["a", "b", "c"]))
    return count_records.fn(run=run, table=SensitiveTable(prepared), executor=LocalExecutor())


def test_a_model_the_plan_may_pick_is_sized_before_the_count_charge(tmp_path: Path) -> None:
    """Synthesis left to the plan: the model it may pick (R up to 3) is sized before the count
    is charged, and refused naming the columns and the way to rule it out."""
    run = reserve(_params(tmp_path, max_model_bytes=10**5))
    with pytest.raises(
        SdsInputError, match=r"may draw the records from the consistent model.*a \("
    ):
        _counted(run)
    _nothing_charged(run)
    records = reserve(_params(tmp_path / "r", max_model_bytes=10**5, synthesis="records"))
    assert _counted(records).value > 0  # records pinned: no model, nothing to refuse


def test_records_too_wide_for_their_keys_are_refused_before_the_count_charge(
    tmp_path: Path,
) -> None:
    """At R = 6 the combination keys of 2003 attributes (b's "0" is an empty cell) overflow
    int64: refused before the count is charged (the synthesis refused it after the charges)."""
    run = reserve(_params(tmp_path, reporting_length=6, synthesis="records"))
    with pytest.raises(SdsInputError, match=r"2003 attributes with reporting_length 6.*Nothing"):
        _counted(run)
    _nothing_charged(run)


def test_with_dp_bins_the_model_is_sized_before_the_binning_charge(tmp_path: Path) -> None:
    """The binning stage, the first charge, sizes the model from the raw values (a DP-binned
    column counted as its q bins) and refuses before charging."""
    schema = {
        "allow_extra_columns": True,
        "columns": [
            {"name": "b", "type": "integer", "min": 0, "max": 9, "bins": {"dp_quantiles": 3}}
        ],
    }
    run = reserve(_params(tmp_path, max_model_bytes=10**5, synthesis="model", table_schema=schema))
    with pytest.raises(SdsInputError, match=r"synthesis = 'model'.*a \(2001 values\)"):
        choose_bins.fn(run=run, table=SensitiveTable(_table()), executor=LocalExecutor())
    _nothing_charged(run)


def test_a_schema_that_bounds_every_column_sizes_it_before_the_reservation(
    tmp_path: Path,
) -> None:
    """Every released column declares its values: the model is sized from the schema alone, by
    the budget stage, before anything is reserved."""
    schema = {
        "columns": [
            {"name": "a", "values": [f"a{i}" for i in range(N)]},
            {"name": "b", "values": ["0", "1", "2"]},
        ]
    }
    params = _params(tmp_path, max_model_bytes=10**5, table_schema=schema, use_columns=["a", "b"])
    with pytest.raises(SdsInputError, match=r"consistent model.*a \(2001 values\)"):
        reserve_budget.fn(params)
    assert Ledger.open(tmp_path).reservation("r1") is None
