"""``synthetic.parquet`` as a directory of part files when a release has more records than
``synthetic_part_records``: the same records as one file, each part in the manifest, and
``sds audit --verify`` (and the replay) naming a tampered, missing or stray part."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from sds_release.store.audit.signing import verify_signed_release
from tests.helpers import run_cli

RECORDS = 2_500
PART = 1_000


def _release(tiny_csv: Path, config: Path, home: Path) -> Path:
    code, out, err = run_cli(
        "release",
        str(tiny_csv),
        "--config",
        str(config),
        "--home",
        str(home),
        "--release-id",
        "parts",
        "--seed",
        "3",
        "--synthetic-records",
        str(RECORDS),
        "--quiet",
    )
    assert code == 0, err
    return Path(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def releases(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, tiny_config: Path, prefect_server: str
) -> tuple[Path, Path]:
    """The same release (id, seed) as one file and split in parts of PART records."""
    root = tmp_path_factory.mktemp("parts")
    split = root / "split.toml"
    split.write_text(f"synthetic_part_records = {PART}\n" + tiny_config.read_text())
    return _release(tiny_csv, tiny_config, root / "one"), _release(tiny_csv, split, root / "split")


def _verify(home: Path) -> tuple[int, list[str]]:
    code, out, err = run_cli("audit", "--verify", "--json", "--home", str(home))
    return code, json.loads(out)["problems"] if out.strip() else [err]


def test_parts_hold_the_single_files_records_and_are_in_the_manifest(
    releases: tuple[Path, Path],
) -> None:
    one, split = releases
    assert (one / "synthetic.parquet").is_file()
    parts = sorted((split / "synthetic.parquet").iterdir())
    assert [p.name for p in parts] == [f"part-{i:05d}.parquet" for i in range(3)]
    assert [pq.read_metadata(p).num_rows for p in parts] == [1000, 1000, 500]
    whole = pd.read_parquet(one / "synthetic.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(split / "synthetic.parquet"), whole)
    pd.testing.assert_frame_equal(
        pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True), whole
    )
    for name in ("aggregates.parquet", "synthetic.csv"):  # the rest is unchanged
        assert (one / name).read_bytes() == (split / name).read_bytes()

    manifest = json.loads((split / "manifest.json").read_text())
    layout = manifest["synthetic_parts"]
    assert layout["rows"] == RECORDS
    assert [(p["file"], p["rows"]) for p in layout["parts"]] == [
        ("synthetic.parquet/part-00000.parquet", 1000),
        ("synthetic.parquet/part-00001.parquet", 1000),
        ("synthetic.parquet/part-00002.parquet", 500),
    ]
    assert {p["file"] for p in layout["parts"]} <= set(manifest["artifacts"])
    assert "synthetic.parquet" not in manifest["artifacts"]
    assert "synthetic_parts" not in json.loads((one / "manifest.json").read_text())
    assert _verify(split.parent.parent.parent)[0] == 0


@pytest.mark.parametrize("damage", ["tamper", "remove", "stray", "miscount"])
def test_audit_verify_names_the_damaged_part(
    damage: str, releases: tuple[Path, Path], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    shutil.copytree(releases[1].parent.parent.parent, home)
    rel = next(home.glob("releases/*/parts"))
    part = rel / "synthetic.parquet" / "part-00001.parquet"
    if damage == "tamper":  # another valid Parquet file of the same rows, other bytes
        table = pq.read_table(part)
        pq.write_table(table.slice(1).append_column("x", [["1"] * (table.num_rows - 1)]), part)
        expected = "part-00001.parquet: sha256 does not match"
    elif damage == "remove":
        part.unlink()
        expected = "part-00001.parquet: listed in the manifest but missing"
    elif damage == "stray":
        shutil.copy(part, rel / "synthetic.parquet" / "part-00003.parquet")
        expected = "part-00003.parquet: file not listed in the manifest"
    else:  # the manifest's rows edited (its signature then fails as well)
        manifest = json.loads((rel / "manifest.json").read_text())
        manifest["synthetic_parts"]["parts"][1]["rows"] = 999
        (rel / "manifest.json").write_text(json.dumps(manifest))
        expected = "part-00001.parquet: 1000 rows, the manifest says 999"
    code, problems = _verify(home)
    assert code == 1
    assert any(expected in p for p in problems), problems
    # the release directory on its own (as a user receives it) tells the same
    assert any(expected in p for p in verify_signed_release(rel).problems)
