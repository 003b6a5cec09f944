"""Which releases make a series: complete and verified ones, one per period (the newest), in
order; what is left out is named; a dataset mixing periodic and whole releases is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.series.sources import series_sources
from tests.store.series.conftest import MakeRelease

AUG, SEP, OCT = "2026-08", "2026-09", "2026-10"


def test_one_release_per_period_in_period_order(make_release: MakeRelease, home: Path) -> None:
    """Periods in text order whatever the creation order; a period released twice counts its
    newest release and names the older one as superseded."""
    make_release("c-oct", {"sex:0": 5}, period=OCT, created_at="2026-11-01T00:00:00+00:00")
    make_release("a-sep-old", {"sex:0": 5}, period=SEP, created_at="2026-10-01T00:00:00+00:00")
    make_release("b-aug", {"sex:0": 5}, period=AUG, created_at="2026-10-02T00:00:00+00:00")
    make_release("d-sep-new", {"sex:0": 5}, period=SEP, created_at="2026-11-02T00:00:00+00:00")
    found = series_sources(home, "d")
    assert found.by_period and found.last == OCT
    assert [(r.period, r.release_id) for r in found.releases] == [
        (AUG, "b-aug"),
        (SEP, "d-sep-new"),
        (OCT, "c-oct"),
    ]
    assert [(s.release_id, s.reason) for s in found.skipped] == [
        ("a-sep-old", f"superseded by d-sep-new (period {SEP})")
    ]


def test_until_stops_at_a_period(make_release: MakeRelease, home: Path) -> None:
    """--until keeps the periods at or before it."""
    for period in (AUG, SEP, OCT):
        make_release(f"r-{period}", {"sex:0": 5}, period=period)
    assert [r.period for r in series_sources(home, "d", until=SEP).releases] == [AUG, SEP]


def test_a_release_that_does_not_verify_is_left_out_and_named(
    make_release: MakeRelease, home: Path
) -> None:
    """A complete release whose file no longer matches its manifest is not in the series; the
    reason names the file. A running release is simply not part of it."""
    make_release("r-aug", {"sex:0": 5}, period=AUG)
    bad = make_release("r-sep", {"sex:0": 5}, period=SEP)
    (bad / "aggregates.parquet").write_bytes(b"changed")
    running = make_release("r-oct", {"sex:0": 5}, period=OCT)
    (running / "manifest.json").write_text('{"status": "running"}')
    found = series_sources(home, "d")
    assert [r.release_id for r in found.releases] == ["r-aug"]
    [skipped] = found.skipped
    assert skipped.release_id == "r-sep" and "aggregates.parquet: sha256" in skipped.reason


def test_a_release_changed_after_signing_is_left_out(make_release: MakeRelease, home: Path) -> None:
    """A signed release whose manifest was edited afterwards (its signature no longer checks)
    is not in the series."""
    import json

    from sds_release.store.audit.signing import sign_release

    make_release("r-aug", {"sex:0": 5}, period=AUG)
    signed = make_release("r-sep", {"sex:0": 5}, period=SEP)
    sign_release(home, signed)
    assert [r.signed_by is not None for r in series_sources(home, "d").releases] == [False, True]
    manifest = json.loads((signed / "manifest.json").read_text())
    manifest["privacy"]["epsilon"] = 0.5
    (signed / "manifest.json").write_text(json.dumps(manifest))
    found = series_sources(home, "d")
    assert [r.release_id for r in found.releases] == ["r-aug"]
    assert "does not match manifest.json" in found.skipped[0].reason


def test_releases_without_periods_follow_their_creation(
    make_release: MakeRelease, home: Path
) -> None:
    """Without periods every complete release is a point, in the order it was created, named
    by its release id."""
    make_release("z-first", {"sex:0": 5}, created_at="2026-01-01T00:00:00+00:00")
    make_release("a-second", {"sex:0": 5}, created_at="2026-02-01T00:00:00+00:00")
    found = series_sources(home, "d")
    assert not found.by_period
    assert [r.period for r in found.releases] == ["z-first", "a-second"]


@pytest.mark.parametrize(
    ("periods", "until", "match"),
    [
        ((AUG, None), None, "releases of one period .* and releases of the whole table"),
        ((None,), SEP, "--until '2026-09' names a period, but dataset 'd' is not released"),
        ((OCT,), SEP, "no complete, verified release at or before period '2026-09'"),
        ((), None, "dataset 'd' has no complete release in"),
    ],
)
def test_what_cannot_make_a_series_is_refused(
    make_release: MakeRelease,
    home: Path,
    periods: tuple[str | None, ...],
    until: str | None,
    match: str,
) -> None:
    """Mixed releases, --until without periods, nothing before --until, no release at all."""
    home.mkdir(exist_ok=True)
    for i, period in enumerate(periods):
        make_release(f"r{i}", {"sex:0": 5}, period=period)
    with pytest.raises(SdsInputError, match=match):
        series_sources(home, "d", until=until)
