"""Hand-built published releases (a manifest and an aggregates.parquet, nothing else) for the
series tests: the exact counts a series must carry are written here, so every row is known."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sds_release.store.workspace.encoding import HALF_WIDTH_COLUMN, parquet_bytes
from sds_release.store.workspace.files import sha256_file

COLUMNS = ("sex", "age")

MakeRelease = Callable[..., Path]


def _frame(counts: dict[str, int], hw: dict[int, float]) -> pd.DataFrame:
    rows = []
    for combination, count in counts.items():
        values = dict(part.split(":", 1) for part in combination.split(";"))
        length = len(values)
        rows.append(
            {
                "length": length,
                "combination": combination,
                "count": count,
                HALF_WIDTH_COLUMN: hw.get(length),
                **{c: values.get(c) for c in COLUMNS},
            }
        )
    frame = pd.DataFrame(rows)
    frame[HALF_WIDTH_COLUMN] = frame[HALF_WIDTH_COLUMN].astype("Float64")
    for c in COLUMNS:
        frame[c] = frame[c].astype("string")
    return frame


@pytest.fixture
def make_release(tmp_path: Path) -> MakeRelease:
    """``make_release(release_id, counts, period=..., ...)`` writes a complete release of
    dataset ``d`` under ``tmp_path/home`` and returns its directory."""

    def make(
        release_id: str,
        counts: dict[str, int],
        *,
        period: str | None = None,
        epsilon: float = 1.0,
        rows: int = 100,
        hw: dict[int, float] | None = None,
        created_at: str = "2026-01-01T00:00:00.000+00:00",
        reporting_length: int = 2,
        dataset: str = "d",
    ) -> Path:
        folder = tmp_path / "home" / "releases" / dataset / release_id
        folder.mkdir(parents=True)
        hw = hw or {1: 10.0, 2: 7.0}
        (folder / "aggregates.parquet").write_bytes(parquet_bytes(_frame(counts, hw)))
        manifest: dict[str, Any] = {
            "release_id": release_id,
            "dataset": dataset,
            "status": "complete",
            "created_at": created_at,
            "parameters": {"period": period, "reporting_length": reporting_length},
            "input": {"rows": rows},
            "privacy": {
                "epsilon": epsilon,
                "delta": 1e-6,
                "noise": {
                    "record_count": {"scale": 10.0},
                    "by_length": [
                        {"length": k, "noise_sd": v / 1.96}
                        for k, v in hw.items()
                        if k <= reporting_length
                    ],
                },
            },
            "artifacts": {"aggregates.parquet": sha256_file(folder / "aggregates.parquet")},
        }
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        return folder

    return make
