"""The SDS stages hand each other typed values (sds_release/store/run/results.py): the plan stage a
``PlannedRelease`` with the ``SdsPlan``, each length a ``LengthResult``; the flow reads none of
them by key, and a resumed release (its checkpoints, unchanged in form) gives equal values."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import numpy as np

from sds_core.marginals.plan import SdsPlan
from sds_release.flows.release import run_stages
from sds_release.store.config import build_params, load_config
from sds_release.store.executor.local import LocalExecutor
from sds_release.store.run import stages
from sds_release.store.run.release_run import reserve
from sds_release.store.run.results import LengthNoise, LengthResult, PlannedRelease

FLOW = Path(__file__).resolve().parents[2] / "sds_release" / "flows" / "release.py"


def test_the_flow_reads_no_stage_result_by_key() -> None:
    """The stage sequence (sds_release/flows/release.py ``run_stages``) subscripts nothing with a
    string (no ``planned["plan"]``, no ``by_length[k]["survivors"]``): every stage result it reads
    is an attribute."""
    tree = ast.parse(FLOW.read_text(), str(FLOW))
    [stages_fn] = [
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "run_stages"
    ]
    keyed = [
        node.lineno
        for node in ast.walk(stages_fn)
        if isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ]
    assert keyed == []


class _Recorder:
    """Runs each stage's body (``task.fn``) and keeps what it returned, by task name."""

    def __init__(self) -> None:
        self.returned: dict[str, list[Any]] = {}

    def __call__(self, task: Any, *, wait_for: list[Any] | None = None, **kwargs: Any) -> Any:
        value = task.fn(**kwargs)
        self.returned.setdefault(task.name, []).append(value)
        return value


def test_stage_results_are_typed_fresh_and_resumed(
    tiny_csv: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """The plan (R left to it) and the lengths' results are typed values, and the same values
    when the release runs again from its checkpoints."""
    text = tiny_config.read_text().replace("reporting_length = 2\n", "")
    config = tmp_path / "planned.toml"
    config.write_text(text)
    params = build_params(
        load_config(config),
        {"input": str(tiny_csv), "home": str(tmp_path / "home"), "release_id": "typed"},
    )
    runs = []
    for _ in range(2):  # the second run resumes: every stage loads its checkpoint
        recorder = _Recorder()
        out = run_stages(reserve(params), stages.Timeline(), LocalExecutor(), call=recorder)
        runs.append((recorder.returned, out))
    (fresh, fresh_out), (resumed, resumed_out) = runs
    [planned] = fresh[stages.PLAN]
    assert isinstance(planned, PlannedRelease) and isinstance(planned.plan, SdsPlan)
    assert "reporting_length" in planned.plan.chosen
    assert planned.params.reporting_length == planned.plan.reporting_length
    assert resumed[stages.PLAN] == [planned]
    assert isinstance(fresh_out.plan, SdsPlan) and resumed_out.plan == fresh_out.plan
    lengths = fresh[stages.AGGREGATE]
    assert len(lengths) == planned.params.reporting_length
    for step, again in zip(lengths, resumed[stages.AGGREGATE], strict=True):
        assert isinstance(step, LengthResult) and isinstance(step.noise, LengthNoise)
        assert step.noise == again.noise and step.domain == again.domain
        assert np.array_equal(step.survivors.counts, again.survivors.counts)
    assert resumed_out.noise == fresh_out.noise
