"""The GX validation gate: number checks, numeric views and the failing row it names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from sds_release.store.config.schema import ColumnSchema, TableSchema
from sds_release.store.inputs.gate import FLOAT_RE, INTEGER_RE, _numeric_view, run_gate

NUMBERS = ["1", "+3", "-2.5", ".5", "5.", "1e5", "1E-2", "007", "12.000"]
NOT_NUMBERS = ["abc", "1_000", "0x10", "1.2.3", "--1", "e5", "١٢", "inf", "nan", "1 2"]


def test_numeric_view_matches_to_numeric_on_numbers_and_is_nan_elsewhere() -> None:
    """Numbers parse as pandas would; anything FLOAT_RE rejects (and empty cells) is NaN."""
    s = pd.Series([*NUMBERS, *NOT_NUMBERS, None], dtype="string")
    got = _numeric_view(s)
    want = pd.to_numeric(pd.Series(NUMBERS, dtype="string")).to_numpy(dtype=float)
    np.testing.assert_array_equal(got[: len(NUMBERS)], want)
    assert np.isnan(got[len(NUMBERS) :]).all()


@pytest.mark.parametrize(
    ("regex", "good", "bad"),
    [
        (INTEGER_RE, ["0", "-12", "+7", "12.0", "12.", "3.000"], ["1.5", "1e3", "x", "١٢", " 1"]),
        (FLOAT_RE, NUMBERS, NOT_NUMBERS),
    ],
)
def test_number_regexes(regex: str, good: list[str], bad: list[str]) -> None:
    """The integer/float rules accept exactly the ASCII number spellings (after stripping)."""
    s = pd.Series(good + bad, dtype="string")
    ok = s.str.fullmatch(regex).to_numpy(dtype=bool)
    assert ok[: len(good)].all() and not ok[len(good) :].any()


def test_gate_names_the_first_bad_row_of_each_rule() -> None:
    """A bad integer, a value out of range and a missing cell fail with their row numbers."""
    schema = TableSchema(
        columns=[
            ColumnSchema(name="age", type="integer", min=0, max=120, nullable=False),
            ColumnSchema(name="w", type="float"),
        ],
        min_rows=1,
    )
    table = pa.table(
        {"age": ["5", " 7 ", "x", "200", None, "3"], "w": ["1.5", "", "2", "-1e2", "0", "z"]}
    )
    gate = run_gate(table, schema, name="t")
    assert not gate.success
    text = " | ".join(gate.failures)
    assert "column 'age': values must not be empty (first failing data row 5)" in text
    assert "column 'age': values must be an integer (first failing data row 3)" in text
    assert "column 'age': values must be between 0.0 and 120.0 (first failing data row 4)" in text
    assert "column 'w': values must be a number (first failing data row 6)" in text
    good = run_gate(pa.table({"age": ["5", " 7 "], "w": ["1", ""]}), schema, name="t2")
    assert good.success, good.failures


def test_output_schema_never_counts_the_domain_found_in_the_data() -> None:
    """validation.json's output rules come from declared values and the DP aggregates' 1-way
    labels: a value in the data's domain whose 1-way count was suppressed changes nothing."""
    from sds_core.data.domain import Domain
    from sds_core.marginals.aggregates import AggregateSet
    from sds_release.store.inputs.gate import output_schema
    from sds_release.store.inputs.schema_checks import schema_checks

    declared = TableSchema(
        columns=[
            ColumnSchema(name="sex", values=["0", "1"]),
            ColumnSchema(name="age", type="integer", bins={"edges": [0, 30, 121]}),
        ]
    )
    counts = {"sex:0": 9, "sex:1": 8, "age:0-30": 7, "city:north": 6}

    def rules(domain: Domain) -> list[dict[str, object]]:
        published = AggregateSet.from_text_dict(domain, counts, 1, is_dp=True).one_way_labels()
        schema = output_schema(declared, ["sex", "age", "city"], published)
        return [
            {"column": c.column, "rule": c.rule, "kwargs": c.kwargs}
            for c in schema_checks(schema, ["sex", "age", "city"])
        ]

    seen = Domain(("sex", "age", "city"), (("0", "1"), ("0-30",), ("north",)))
    with_suppressed = Domain(  # the neighbour's domain: a new age bin and city, both suppressed
        ("sex", "age", "city"), (("0", "1"), ("0-30", "30-121"), ("Zq7", "north"))
    )
    assert rules(seen) == rules(with_suppressed)
    texts = {r["column"]: r["rule"] for r in rules(with_suppressed) if "one of" in str(r["rule"])}
    assert texts == {
        "sex": "must be one of the 2 declared values",
        "age": "must be one of the 1 values the DP aggregates report for it (length 1)",
        "city": "must be one of the 1 values the DP aggregates report for it (length 1)",
    }


def test_the_suite_is_made_at_once_and_each_result_is_its_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The suite holds every expectation from the start: adding them one by one stored the
    whole suite again each time (150 columns: 11 of 16 s; bench/bench_gate.py). Each column's
    result is still its own: with every other column's values allowed, only the columns given
    an unlisted value fail, each under its own name."""
    import great_expectations as gx

    def one_by_one(*args: object, **kwargs: object) -> None:
        raise AssertionError("an expectation added to a stored suite")

    monkeypatch.setattr(gx.ExpectationSuite, "add_expectation", one_by_one)
    values = ["a", "b"]
    frame = pd.DataFrame({f"c{i}": ["a", "b", "a"] for i in range(40)}, dtype="string")
    frame.loc[1, "c7"] = "z"
    frame.loc[2, "c31"] = "z"
    schema = TableSchema(
        columns=[ColumnSchema(name=f"c{i}", values=values) for i in range(40)], min_rows=1
    )
    gate = run_gate(frame, schema, name="wide")
    failed = [(s["expectation"], s["column"]) for s in gate.summary if not s["success"]]
    assert failed == [
        ("expect_column_values_to_be_in_set", "c7"),
        ("expect_column_values_to_be_in_set", "c31"),
    ]
    assert len(gate.summary) == len(gate.details["results"]) == 42
