"""The preview ``sds plan`` prints (sds_release/store/inputs/preview.py) names itself a preview and
the stage's choice the SDS plan (the figures: tests/store/inputs/test_release_forecast.py)."""

from __future__ import annotations

import json
from pathlib import Path

from sds_release.store.inputs import ReleasePreview, make_preview
from tests.helpers import PROJECT, run_cli

EXAMPLE = PROJECT / "examples" / "pums_ca_10k.csv"
CONFIG = PROJECT / "examples" / "release.toml"


def test_the_preview_says_preview_and_the_sds_plan(tmp_path: Path) -> None:
    """`sds plan` opens with "preview of a release", then gives what the SDS plan would choose."""
    code, out, err = run_cli("plan", str(EXAMPLE), "--config", str(CONFIG), "--home", str(tmp_path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        "preview of a release of dataset pums-ca-10k (nothing read but the header, nothing charged)"
    )
    assert any(line.startswith("SDS plan for N: ") for line in lines)


def test_make_preview_is_the_store_entry(tmp_path: Path) -> None:
    """`make_preview` builds the `ReleasePreview` whose `to_dict` is `sds plan --json`."""
    from sds_release.store.config import build_params, load_config

    params = build_params(
        load_config(CONFIG), {"input": str(EXAMPLE), "home": str(tmp_path), "epsilon": 4.0}
    )
    preview = make_preview(params, records=10_000)
    assert isinstance(preview, ReleasePreview)
    assert preview.to_dict()["charged"] is False and preview.sds_plan is not None


def test_a_table_too_small_for_its_epsilon_is_named_before_any_charge(
    tmp_path: Path, tiny_csv: Path, tiny_config: Path
) -> None:
    """30 records at ε 0.1 (the release of tests/flows/test_empty_counts.py, which ends with no
    1-way count): the length-1 threshold is above N, and `sds plan` says so, what would happen
    and what to do; the example's 10,000 records at ε 4 are not too small."""
    from sds_release.store.config import build_params, load_config

    home = str(tmp_path / "home")
    args = ["--config", str(tiny_config), "--home", home, "--epsilon", "0.1", "--records", "30"]
    code, out, err = run_cli("plan", str(tiny_csv), *args)
    assert code == 0, err
    said = " ".join(out.split())
    assert "too small: the length-1 threshold (" in said and "is at least N = 30" in said
    assert "would most likely be charged and end with no count to publish" in said
    assert "Raise ε or release more rows" in said
    code, out, err = run_cli("plan", str(tiny_csv), *args, "--json")
    assert code == 0 and json.loads(out)["too_small"] is True, err

    params = build_params(load_config(CONFIG), {"input": str(EXAMPLE), "home": home})
    preview = make_preview(params, records=10_000)
    assert preview.too_small is False and preview.to_dict()["too_small"] is False
    code, out, _ = run_cli("plan", str(EXAMPLE), "--config", str(CONFIG), "--home", home)
    assert code == 0 and "too small" not in out
