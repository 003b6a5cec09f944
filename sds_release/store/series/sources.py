"""Which releases a dataset's series is made of: its complete, verified releases, in order.

A dataset released by period contributes one release per period (the newest complete one of
that period; an older one of the same period is superseded), in the periods' text order
(``YYYY-MM`` sorts in time); a dataset without periods contributes every complete release, in
the order they were created. Each release is checked before it is used (its signature against
the home's keys, the file the series reads against its manifest); one that fails is left out
and named. Only published files are read: no ledger, no private file, no sensitive data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sds_core.errors import SdsInputError
from sds_release.store.audit.home import signature_problems
from sds_release.store.workspace.files import sha256_file
from sds_release.store.workspace.home import MANIFEST, validate_id

__all__ = ["AGGREGATES", "SeriesRelease", "SeriesSources", "Skipped", "series_sources"]

AGGREGATES = "aggregates.parquet"
"""The one artifact of a release a series reads (with its ``manifest.json``)."""


@dataclass(frozen=True, slots=True)
class SeriesRelease:
    """One release of the series: where it is and the public facts the series shows.

    Attributes:
        period: the period released, or (a dataset without periods) the release id.
        release_id: the release's id.
        release_dir: its published directory.
        manifest: its ``manifest.json``.
        manifest_sha256: the sha256 of its ``manifest.json`` (what the series' own manifest
            records, binding the series to exactly these releases).
        signed_by: the key id of its verified signature (None: an unsigned release).
    """

    period: str
    release_id: str
    release_dir: Path
    manifest: dict[str, Any]
    manifest_sha256: str
    signed_by: str | None

    @property
    def created_at(self) -> str:
        """When the release was started (its manifest's ``created_at``)."""
        return str(self.manifest.get("created_at") or "")

    @property
    def epsilon(self) -> float:
        """The release's ε."""
        return float(self.manifest["privacy"]["epsilon"])

    @property
    def delta(self) -> float:
        """The release's δ."""
        return float(self.manifest["privacy"]["delta"])

    def facts(self) -> dict[str, Any]:
        """What the series' manifest and page say of this release (all published values)."""
        return {
            "period": self.period,
            "release_id": self.release_id,
            "created_at": self.created_at,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "manifest_sha256": self.manifest_sha256,
            "signed_by": self.signed_by,
        }


@dataclass(frozen=True, slots=True)
class Skipped:
    """A complete release left out of the series, and why."""

    release_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class SeriesSources:
    """The releases of a series, in order, and the complete ones left out."""

    dataset: str
    by_period: bool
    releases: tuple[SeriesRelease, ...]
    skipped: tuple[Skipped, ...]

    @property
    def last(self) -> str:
        """The last period of the series (or, without periods, its last release id)."""
        return self.releases[-1].period


def _complete(home: Path, dataset: str) -> list[tuple[Path, dict[str, Any]]]:
    root = home / "releases" / dataset
    out = []
    for release_dir in sorted(p for p in root.glob("*") if p.is_dir()):
        try:
            manifest = json.loads((release_dir / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # no readable manifest: not a complete release (sds audit names it)
        if isinstance(manifest, dict) and manifest.get("status") == "complete":
            out.append((release_dir, manifest))
    return out


def _problems(
    home: Path, release_dir: Path, manifest: dict[str, Any]
) -> tuple[str | None, list[str]]:
    """What a series needs of a release to trust it: its ids match its folder, its signature
    checks with one of the home's keys (an unsigned release has none to check), and the file it
    reads, ``aggregates.parquet``, is the one its manifest lists. (The other artifacts, which
    can be gigabytes of synthetic records, are ``sds audit --verify``'s to re-hash.)"""
    problems = []
    if manifest.get("release_id") != release_dir.name:
        problems.append(f"manifest release_id {manifest.get('release_id')!r} is not its folder's")
    if manifest.get("dataset") != release_dir.parent.name:
        problems.append(f"manifest dataset {manifest.get('dataset')!r} is not its folder's")
    signed_by, bad = signature_problems(home, release_dir)
    listed = manifest.get("artifacts") if isinstance(manifest.get("artifacts"), dict) else {}
    digest = listed.get(AGGREGATES) if listed else None
    path = release_dir / AGGREGATES
    if digest is None:
        bad.append(f"{AGGREGATES} is not listed in its manifest")
    elif not path.is_file():
        bad.append(f"{AGGREGATES}: listed in the manifest but missing")
    elif sha256_file(path) != digest:
        bad.append(f"{AGGREGATES}: sha256 does not match the manifest (file modified)")
    return signed_by, problems + bad


def series_sources(home: str | Path, dataset: str, *, until: str | None = None) -> SeriesSources:
    """The complete, verified releases of ``dataset`` in ``home``, in series order.

    Args:
        home: the SDS home.
        dataset: the dataset id.
        until: the last period to include (a dataset by period); None: every period.

    Raises:
        SdsInputError: a bad dataset id, no complete release (or none at or before
            ``until``), releases both with and without a period, or ``until`` given for a
            dataset without periods.
    """
    home = Path(home)
    validate_id(dataset, "dataset id")
    found = _complete(home, dataset)
    if not found:
        raise SdsInputError(
            f"dataset {dataset!r} has no complete release in {home / 'releases' / dataset}; "
            "`sds audit` lists the releases of a home (pass --home DIR or set SDS_HOME if it "
            "is elsewhere)"
        )
    periods = {d.name: (m.get("parameters") or {}).get("period") for d, m in found}
    with_period = sorted(r for r, p in periods.items() if p is not None)
    if with_period and len(with_period) != len(found):
        without = sorted(r for r, p in periods.items() if p is None)
        raise SdsInputError(
            f"dataset {dataset!r} has releases of one period ({', '.join(with_period[:3])}) and "
            f"releases of the whole table ({', '.join(without[:3])}); a series follows one of "
            "the two: give the periodic releases a dataset id of their own"
        )
    by_period = bool(with_period)
    if until is not None and not by_period:
        raise SdsInputError(
            f"--until {until!r} names a period, but dataset {dataset!r} is not released by "
            "period; leave out --until"
        )
    skipped: list[Skipped] = []
    chosen: list[SeriesRelease] = []
    for release_dir, manifest in found:
        period = str(periods[release_dir.name] or release_dir.name)
        if until is not None and period > until:
            continue
        signed_by, problems = _problems(home, release_dir, manifest)
        if problems:
            skipped.append(Skipped(release_dir.name, "does not verify: " + "; ".join(problems)))
            continue
        chosen.append(
            SeriesRelease(
                period=period,
                release_id=release_dir.name,
                release_dir=release_dir,
                manifest=manifest,
                manifest_sha256=sha256_file(release_dir / MANIFEST),
                signed_by=signed_by,
            )
        )
    if by_period:  # per period the newest release; the others are superseded
        newest: dict[str, SeriesRelease] = {}
        for r in sorted(chosen, key=lambda r: (r.created_at, r.release_id)):
            if r.period in newest:
                old = newest[r.period]
                skipped.append(
                    Skipped(old.release_id, f"superseded by {r.release_id} (period {r.period})")
                )
            newest[r.period] = r
        chosen = [newest[p] for p in sorted(newest)]
    else:
        chosen.sort(key=lambda r: (r.created_at, r.release_id))
    if not chosen:
        at = "" if until is None else f" at or before period {until!r}"
        reasons = "; ".join(f"{s.release_id} {s.reason}" for s in skipped)
        raise SdsInputError(
            f"dataset {dataset!r} has no complete, verified release{at}"
            + (f" ({reasons})" if reasons else "")
            + "; `sds audit --verify` checks each release"
        )
    return SeriesSources(
        dataset, by_period, tuple(chosen), tuple(sorted(skipped, key=lambda s: s.release_id))
    )
