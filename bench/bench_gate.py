"""The input gate's Great Expectations suite by the number of columns.

Times :func:`sds_release.store.inputs.gate.run_gate` (the suite the input and output gates run)
on made-up tables of categorical columns (``--rows`` rows, each width of ``--columns``), and,
in the same process, how long adding the same expectations one by one
(``ExpectationSuite.add_expectation``, the gate's way before 2026-11-29) takes: GX stores the
whole suite again for each expectation it adds, so that way is quadratic in the columns.

    .venv/bin/python bench/bench_gate.py --rows 1000 --columns 10 50 150

No sensitive data: the tables are made up here.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from sds_release.store.config.schema import TableSchema
from sds_release.store.inputs.gate import run_gate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--columns", type=int, nargs="+", default=[10, 50, 150])
    args = ap.parse_args()

    import great_expectations as gx
    import great_expectations.expectations as gxe

    values = [str(v) for v in range(5)]
    rng = np.random.default_rng(0)
    run_gate(pd.DataFrame({"c0": values}), _schema(1, values), name="warm")
    print("| columns | expectations | rows | gate (s) | adding them one by one (s) |")
    print("|---:|---:|---:|---:|---:|")
    for width in args.columns:
        frame = pd.DataFrame(
            {f"c{i}": rng.choice(values, size=args.rows) for i in range(width)}, dtype="string"
        )
        schema = _schema(width, values)
        start = time.perf_counter()
        gate = run_gate(frame, schema, name="bench")
        took = time.perf_counter() - start
        assert gate.success, gate.failures
        suite = gx.get_context(mode="ephemeral").suites.add(gx.ExpectationSuite(name="one-by-one"))
        start = time.perf_counter()
        for row in gate.summary[1:]:
            if row["expectation"] == "expect_column_values_to_not_be_null":
                suite.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column=row["column"]))  # type: ignore[attr-defined]
            elif row["expectation"] == "expect_column_values_to_be_in_set":
                suite.add_expectation(
                    gxe.ExpectColumnValuesToBeInSet(column=row["column"], value_set=values)  # type: ignore[attr-defined]
                )
        adding = time.perf_counter() - start
        print(f"| {width} | {len(gate.summary)} | {args.rows:,} | {took:.2f} | {adding:.2f} |")


def _schema(width: int, values: list[str]) -> TableSchema:
    """``width`` categorical columns c0, c1, ... of ``values``, no empty cell allowed."""
    columns = [{"name": f"c{i}", "values": values, "nullable": False} for i in range(width)]
    return TableSchema(columns=columns, min_rows=1, max_rows=None)


if __name__ == "__main__":
    main()
