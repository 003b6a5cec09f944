"""The series folder: the same releases give the same bytes, signed by the home's key; the check
of a copied folder finds a changed file, a changed manifest and an extra file."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sds_core.errors import SdsInputError
from sds_release.store.audit.signing import key_id, signing_key
from sds_release.store.series.files import series_dir, verify_series, write_series
from tests.store.series.conftest import MakeRelease

AUG, SEP = "2026-08", "2026-09"


@pytest.fixture
def two_months(make_release: MakeRelease, home: Path) -> Path:
    """August and September of dataset d (sex:1 suppressed in September)."""
    make_release("r-aug", {"sex:0": 50, "sex:1": 40}, period=AUG)
    make_release("r-sep", {"sex:0": 62}, period=SEP)
    return home


def test_the_series_is_signed_and_reproducible(two_months: Path, tmp_path: Path) -> None:
    """Written to HOME/series/d/<last period>/; a second build gives the same bytes; the
    manifest names the releases (with their manifests' sha256) and the files; verified."""
    first = write_series(two_months, "d")
    assert first.path == series_dir(two_months, "d", SEP) == two_months / "series" / "d" / SEP
    before = {p.name: p.read_bytes() for p in first.path.iterdir()}
    assert set(before) == {
        "series.parquet", "series.html", "series.json", "series.sig", "signing-key.pub",
    }  # fmt: skip
    again = write_series(two_months, "d")
    assert {p.name: p.read_bytes() for p in again.path.iterdir()} == before
    manifest = json.loads(before["series.json"])
    assert manifest["periods"] == [AUG, SEP] and manifest["kind"] == "sds-series"
    assert [r["release_id"] for r in manifest["releases"]] == ["r-aug", "r-sep"]
    assert set(manifest["artifacts"]) == {"series.parquet", "series.html"}
    check = verify_series(first.path)
    assert check.ok and check.key_id == key_id(signing_key(two_months).public_key())
    frame = pd.read_parquet(first.path / "series.parquet")
    suppressed = frame[(frame["period"] == SEP) & (frame["combination"] == "sex:1")]
    assert suppressed["suppressed"].tolist() == [True] and suppressed["count"].isna().all()


@pytest.mark.parametrize(
    ("change", "found"),
    [
        (
            lambda d: (d / "series.parquet").write_bytes(b"x"),
            "series.parquet: sha256 does not match",
        ),
        (lambda d: (d / "series.json").write_text("{}"), "does not match series.json"),
        (lambda d: (d / "extra.csv").write_text("a"), "extra.csv: file not listed"),
        (lambda d: (d / "series.sig").unlink(), "no series.sig: the series.json is not signed"),
    ],
)
def test_the_check_finds_any_change(two_months: Path, change: object, found: str) -> None:
    """A changed file, manifest or signature, or an extra file: not verified, named."""
    path = write_series(two_months, "d").path
    change(path)  # type: ignore[operator]
    check = verify_series(path)
    assert not check.ok and any(found in p for p in check.problems), check.problems


def test_another_folder_is_never_overwritten(two_months: Path, tmp_path: Path) -> None:
    """--out naming a folder that holds other files is refused, and nothing is written."""
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    with pytest.raises(SdsInputError, match="does not hold a series"):
        write_series(two_months, "d", out=other)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    assert write_series(two_months, "d", out=tmp_path / "new").path == tmp_path / "new"
