"""``reconcile_one_way`` from a release config reaches the synthesis (and only the records mode
accepts it): the option is usable from ``sds release``, not only from the library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import sds_core.synthesis.generator as generator
from tests.helpers import run_cli


def test_release_config_turns_on_the_one_way_reconciliation(
    tiny_csv: Path,
    tiny_config: Path,
    tmp_path: Path,
    prefect_server: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    real = generator.reconcile_one_way

    def spy(table: Any, aggregates: Any, *, rng: Any, **options: Any) -> Any:
        calls.append(table.n_records)
        return real(table, aggregates, rng=rng, **options)

    monkeypatch.setattr(generator, "reconcile_one_way", spy)
    config = tmp_path / "reconcile.toml"
    config.write_text("reconcile_one_way = true\n" + tiny_config.read_text())
    code, out, err = run_cli(
        "release",
        str(tiny_csv),
        "--config",
        str(config),
        "--home",
        str(tmp_path / "home"),
        "--seed",
        "1",
        "--quiet",
    )
    assert code == 0, err
    manifest = json.loads((Path(out.strip().splitlines()[-1]) / "manifest.json").read_text())
    assert manifest["parameters"]["reconcile_one_way"] is True
    assert len(calls) == 1 and calls[0] > 0


def test_reconciliation_with_the_model_mode_is_refused_before_anything_runs(
    tiny_csv: Path, tiny_config: Path, tmp_path: Path
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(
        "reconcile_one_way = true\n"
        + tiny_config.read_text().replace('synthesis = "records"', 'synthesis = "model"')
    )
    home = tmp_path / "home"
    code, _, err = run_cli("release", str(tiny_csv), "--config", str(config), "--home", str(home))
    assert code == 2
    assert "reconcile_one_way" in err and "synthesis = 'records'" in err
    assert not (home / "ledger.sqlite").exists()
