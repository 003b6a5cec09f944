"""The executor is chosen once per release and handed to the stages: the tasks never ask which
one they run on (no import of an executor package, no comparison with the executor's name, no
type test of a table), and every stage's data work goes through the executor it is handed."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from sds_release.flows.release import EXECUTORS, run_stages
from sds_release.store.config import build_params, load_config
from sds_release.store.executor.local import LocalExecutor
from sds_release.store.publish.artifacts import write_release
from sds_release.store.run import stages
from sds_release.store.run.release_run import reserve

TASKS = Path(__file__).resolve().parents[2] / "sds_release" / "tasks"
TABLE_TYPES = {"DaskBackend", "ClusterTable", "DaskInput", "PreparedTable", "Table"}


def _branches(path: Path) -> list[str]:
    """Where a task module imports an executor package, compares with ``executor``, or tests
    a table's type."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            ("sds_release.store.cluster", "sds_release.store.executor.local")
        ):
            found.append(f"{path.name}:{node.lineno} imports {node.module}")
        elif isinstance(node, ast.Compare):
            names = [n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "")
                     for n in (node.left, *node.comparators)]  # fmt: skip
            if "executor" in names:
                found.append(f"{path.name}:{node.lineno} compares the executor")
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "isinstance"
            and len(node.args) == 2
        ):
            kinds = {getattr(n, "id", getattr(n, "attr", "")) for n in ast.walk(node.args[1])}
            if kinds & TABLE_TYPES:
                found.append(f"{path.name}:{node.lineno} tests a table's type")
    return found


def test_tasks_never_branch_on_the_executor() -> None:
    """No task module imports the Dask or the local executor, compares the ``executor``
    parameter or tests whether a table is a local or a cluster one."""
    modules = sorted(TASKS.glob("*.py"))
    assert len(modules) >= 10
    assert [b for m in modules for b in _branches(m)] == []


def test_the_checks_see_a_branch(tmp_path: Path) -> None:
    """The scan finds each kind of branch (so the test above can fail)."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from sds_release.store.cluster.backend import DaskBackend\n"
        "if params.executor == 'dask': pass\n"
        "ok = isinstance(table.value, (PreparedTable, int))\n"
    )
    assert len(_branches(probe)) == 3


class _Spy:
    """The local executor, recording every method the stages call on it."""

    def __init__(self) -> None:
        self.inner = LocalExecutor()
        self.name, self.preflight_reads_rows = "spy", True
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return method(*args, **kwargs)

        return recorded


def _body(task: Any, *, wait_for: list[Any] | None = None, **kwargs: Any) -> Any:
    return task.fn(**kwargs)


def test_every_stage_works_on_the_executor_it_is_handed(
    tiny_csv: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """A release whose stages are handed a recording executor: ingest, the gate, the record
    limit, the zero cells, prepare, count and every length, synthesize, the output gate and
    publish's chunks all go through it, in the stages' order."""
    params = build_params(
        load_config(tiny_config),
        # keyed (seed and id): 150 rows at epsilon 2 sometimes keep no 1-way count, which
        # ends the release before synthesis (test_empty_counts.py)
        {
            "input": str(tiny_csv),
            "home": str(tmp_path / "home"),
            "record_limit": 150,
            "seed": 1,
            "release_id": "spied",
        },
    )
    run = reserve(params)
    spy = _Spy()
    out = run_stages(run, stages.Timeline(), spy, call=_body)  # type: ignore[arg-type]
    write_release(
        out.run,
        parameters=out.run.params.public_dict(),
        input_sha256=out.input_sha256,
        aggregates=out.aggregates,
        synthetic=out.synthetic,
        synthetic_chunks=spy.chunks(out.synthetic, None),
        evaluation=out.evaluation,
        validation={"input": out.input_summary, "output": out.output_summary},
        stages=[],
        noise=out.noise,
        plan=out.plan,
    )
    assert spy.calls == [
        "read_input",
        "held",
        "validate_input",
        "first_rows",
        "zero_shares",
        "prepare",
        "fingerprint",
        "counting_backend",  # count
        "counting_backend",  # aggregate-1
        "counting_backend",  # aggregate-2
        "checkpointed",
        "synthesize",
        "held",
        "validate_output",
        "chunks",
    ]
    assert out.synthetic.n_records > 0


def test_the_flow_knows_each_executor_by_its_name() -> None:
    """The flow's registry: one entry per ``executor`` value, each the executor's session."""
    from sds_release.store.cluster.executor import DaskExecutor
    from sds_release.store.config.release_params import ReleaseParams

    choices = ReleaseParams.model_fields["executor"].annotation
    assert set(EXECUTORS) == set(choices.__args__)  # type: ignore[union-attr]
    assert EXECUTORS["local"] == LocalExecutor.session
    assert EXECUTORS["dask"] == DaskExecutor.session
    with EXECUTORS["local"](None) as executor:  # type: ignore[arg-type]
        assert isinstance(executor, LocalExecutor)


@pytest.mark.parametrize("what", ["parts", "chunks"])
def test_the_local_executor_says_nothing_of_where(what: str) -> None:
    """Data in this process: the stage logs add nothing."""
    assert LocalExecutor().held(object(), what) == ""
