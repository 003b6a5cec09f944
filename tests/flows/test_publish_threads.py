"""Publish writes the aggregates' Parquet and, in a second thread, the synthetic files and the
TSV: together for releases of at most one Parquet row group of combinations, one after the
other beyond (memory); the same bytes either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import sds_release.store.publish.artifacts as artifacts
from sds_release.store.workspace.files import sha256_file
from tests.helpers import COLUMNS, EXAMPLE, TINY_CONFIG, run_cli

COMPARED = (
    "aggregates.parquet",
    "aggregates.tsv",
    "synthetic.csv",
    "synthetic.parquet",
    "validation.json",
    "evaluation.json",
    "explorer.html",
)


def _release(csv: Path, config: Path, home: Path) -> Path:
    code, out, err = run_cli(
        *("release", str(csv), "--config", str(config), "--home", str(home)),
        *("--release-id", "threads", "--seed", "3", "--quiet"),
    )
    assert code == 0, err
    return Path(out.strip().splitlines()[-1])


def test_publish_one_after_the_other_gives_the_same_files(
    tmp_path: Path, prefect_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release whose combinations exceed the (lowered) row group writes the synthetic files
    after the aggregates' Parquet, and publishes the bytes of the threads run together."""
    csv = tmp_path / "tiny.csv"
    pd.read_csv(EXAMPLE, dtype=str, keep_default_na=False)[COLUMNS].iloc[:300].to_csv(
        csv, index=False
    )
    config = tmp_path / "release.toml"
    config.write_text(TINY_CONFIG)
    together = _release(csv, config, tmp_path / "together")

    seen: list[bool] = []
    write_synthetic = artifacts.write_synthetic

    def after_parquet(out: Path, *args: Any) -> Any:
        seen.append((out / "aggregates.parquet").is_file())  # written (atomically) already?
        return write_synthetic(out, *args)

    monkeypatch.setattr(artifacts, "AGGREGATE_ROWS", 1)
    monkeypatch.setattr(artifacts, "write_synthetic", after_parquet)
    apart = _release(csv, config, tmp_path / "apart")
    assert seen == [True]
    for name in COMPARED:
        assert sha256_file(apart / name) == sha256_file(together / name), name
