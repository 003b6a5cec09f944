"""The GX checker process gives the in-process gate results (the kill test is
tests/e2e/test_gx_checker_kill.py)."""

from __future__ import annotations

import pandas as pd

from sds_release.store.config.schema import ColumnSchema, TableSchema
from sds_release.store.inputs import gx_suite
from sds_release.store.inputs.gate import run_gate

SCHEMA = TableSchema(
    columns=[
        ColumnSchema(name="sex", values=["0", "1"], nullable=False),
        ColumnSchema(name="age", type="integer", min=0, max=120),
    ],
    min_rows=2,
)


def test_checker_gives_the_in_process_results() -> None:
    """The same table through the checker and in-process: same verdicts, summary and failures."""
    frame = pd.DataFrame({"sex": ["0", "1", "2", "1"], "age": ["30", "x", "200", ""]})
    here = run_gate(frame, SCHEMA, name="input")
    gx_suite.start_checker()
    try:
        assert gx_suite.checker_running()
        there = run_gate(frame, SCHEMA, name="input")
    finally:
        gx_suite.stop_checker()
    assert not gx_suite.checker_running()
    assert (there.success, there.summary, there.failures) == (
        here.success,
        here.summary,
        here.failures,
    )
    assert not here.success and len(here.failures) == 3


def test_checker_is_forked_only_from_one_thread() -> None:
    """``fork`` (pandas and pyarrow already loaded) while the process runs one thread, else
    ``spawn``: a fork copies no lock another thread holds."""
    import subprocess
    import sys

    from tests.helpers import PROJECT

    code = (
        "import threading, time; from sds_release.store.inputs import gx_suite; "
        "print(gx_suite.start_method()); "
        "threading.Thread(target=time.sleep, args=(2,), daemon=True).start(); "
        "print(gx_suite.start_method())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT, check=True
    )
    assert out.stdout.split() == ["fork", "spawn"]
