"""The benchmark's timing marks: one JSON line per mark or span when asked, nothing otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sds_release.store.run.timing import TIMING_ENV, mark, span


def test_marks_and_spans_are_appended_as_json_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mark and a span (also one that raises) each append one line: name, times, process."""
    path = tmp_path / "marks.jsonl"
    monkeypatch.setenv(TIMING_ENV, str(path))
    mark("client:main", flow_run_id="abc")
    with span("stage:count"):
        pass
    with pytest.raises(ValueError, match="boom"), span("stage:ingest"):
        raise ValueError("boom")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line.get("mark") or line.get("span") for line in lines] == [
        "client:main",
        "stage:count",
        "stage:ingest",
    ]
    assert lines[0]["flow_run_id"] == "abc"
    assert all(line["t1"] >= line["t0"] for line in lines[1:])
    assert {line["pid"] for line in lines} == {lines[0]["pid"]}


def test_nothing_is_written_without_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unset (every release but the benchmark's): no file is created."""
    monkeypatch.delenv(TIMING_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    mark("client:main")
    with span("stage:count"):
        pass
    assert list(tmp_path.iterdir()) == []
