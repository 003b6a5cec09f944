"""`sds audit RELEASE_ID --replay`: identical replays, and every kind of tampering detected."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sds_core.errors import SdsInternalError
from sds_release.store.ledger.replay import ReplayLedger
from sds_release.store.ledger.values import ChargeRow, Reservation
from sds_release.store.workspace.files import sha256_file
from sds_release.store.workspace.manifest import Manifest
from tests.helpers import charges, run_cli

RID = "replay-me"
CHECKPOINTED = ("count", "aggregate-1", "aggregate-2", "normalize", "synthesize", "evaluate")


def _release(tiny_csv: Path, tiny_config: Path, home: Path, rid: str, *extra: str) -> Path:
    code, out, err = run_cli(
        "release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home),
        "--release-id", rid, "--seed", "7", "--quiet", *extra,
    )  # fmt: skip
    assert code == 0, err
    return Path(out.strip().splitlines()[-1])


def _replay(home: Path, input_path: Path, rid: str = RID) -> tuple[int, dict | None, str]:
    """Replay in-process; (exit code, the JSON report or None, stderr)."""
    code, out, err = run_cli(
        "audit", rid, "--replay", "--input", str(input_path), "--home", str(home), "--json"
    )
    return code, (json.loads(out) if out.strip() else None), err


def _snapshot(home: Path) -> dict[str, str]:
    """sha256 of every file of a home (ledger, private workspace, releases)."""
    return {str(p.relative_to(home)): sha256_file(p) for p in home.rglob("*") if p.is_file()}


def _differs(report: dict) -> set[tuple[str, str]]:
    return {(c["stage"], c["subject"]) for c in report["checks"] if c["status"] == "differs"}


@pytest.fixture(scope="module")
def released(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, tiny_config: Path, prefect_server: str
) -> Path:
    """A complete aggregate-seeded release (id ``replay-me``); returns its home."""
    home = tmp_path_factory.mktemp("replayhome")
    _release(tiny_csv, tiny_config, home, RID)
    return home


@pytest.fixture
def copied(released: Path, tmp_path: Path) -> Path:
    """A copy of the released home, free to tamper with."""
    return Path(shutil.copytree(released, tmp_path / "home"))


def test_untouched_release_replays_identically(released: Path, tiny_csv: Path) -> None:
    """Every stage and artifact matches; the home (ledger included) is not changed at all."""
    before = _snapshot(released)
    code, report, err = _replay(released, tiny_csv)
    assert code == 0, err
    assert report is not None and report["identical"]
    assert {c["status"] for c in report["checks"]} <= {"match", "note"}
    subjects = {(c["stage"], c["subject"]) for c in report["checks"]}
    assert {(s, "checkpoint") for s in CHECKPOINTED} <= subjects
    manifest = json.loads(next(released.glob(f"releases/*/{RID}/manifest.json")).read_text())
    compared = {c["subject"] for c in report["checks"]}
    assert {*manifest["artifacts"], "manifest.json", "input", "charges"} <= compared
    assert _snapshot(released) == before  # nothing charged, nothing written, nothing left
    assert not list((released / "private").glob("_replay-*"))


def test_release_is_signed_and_verifies(released: Path) -> None:
    """The published release carries manifest.sig + signing-key.pub; verify and audit accept it."""
    release = next(released.glob(f"releases/*/{RID}"))
    assert (release / "manifest.sig").is_file() and (release / "signing-key.pub").is_file()
    code, out, _ = run_cli("verify", str(release))
    assert code == 0 and out.strip().endswith("verified")
    code, out, _ = run_cli("audit", "--verify", "--json", "--home", str(released))
    assert code == 0
    [row] = json.loads(out)["releases"]
    assert row["signed_by"].startswith("sha256:")


def test_tampered_aggregate_is_caught_by_replay_only(copied: Path, tiny_csv: Path) -> None:
    """An insider edits a count, fixes the manifest hash and re-signs: --verify and `sds verify`
    pass, the replay names the aggregate file."""
    release = next(copied.glob(f"releases/*/{RID}"))
    tsv = release / "aggregates.tsv"
    lines = tsv.read_text().splitlines()
    combo, count = lines[2].split("\t")
    lines[2] = f"{combo}\t{int(count) + 1}"
    tsv.write_text("\n".join(lines) + "\n")
    m = Manifest.load(release)
    m.record_artifact("aggregates.tsv", tsv)
    m.save(release)
    assert run_cli("sign", RID, "--home", str(copied))[0] == 0
    assert run_cli("audit", "--verify", "--home", str(copied))[0] == 0
    assert run_cli("verify", str(release))[0] == 0

    code, report, _ = _replay(copied, tiny_csv)
    assert code == 1 and report is not None and not report["identical"]
    assert _differs(report) == {("normalize", "aggregates.tsv"), ("publish", "manifest.json")}
    [manifest_check] = [c for c in report["checks"] if c["subject"] == "manifest.json"]
    assert manifest_check["detail"] == "differs in artifacts.aggregates.tsv"


def test_swapped_input_is_refused_before_anything_runs(
    released: Path, tiny_csv: Path, tmp_path: Path
) -> None:
    """Another input (one cell changed) is refused by its sha256, with exit 2 and the fix."""
    other = tmp_path / "other.csv"
    rows = tiny_csv.read_text().splitlines()
    rows[1] = rows[1].replace("1", "0", 1)
    assert rows != tiny_csv.read_text().splitlines()
    other.write_text("\n".join(rows) + "\n")
    before = _snapshot(released)
    code, report, err = _replay(released, other)
    assert code == 2 and report is None
    assert f"is not the input of release '{RID}'" in err and "nothing was recomputed" in err
    assert _snapshot(released) == before


def test_input_commitment_is_keyed_and_needs_its_key(copied: Path, tiny_csv: Path) -> None:
    """The manifest commits to the input with the private key (never its plain sha256); the
    replay opens it, and refuses (exit 2) without the key."""
    import hashlib

    from sds_release.store.inputs.commitment import input_commitment

    release = next(copied.glob(f"releases/*/{RID}"))
    fingerprint = json.loads((release / "manifest.json").read_text())["input"]
    plain = hashlib.sha256(tiny_csv.read_bytes()).hexdigest()
    key = (copied / "private" / RID / "input-commitment.key").read_bytes()
    assert "sha256" not in fingerprint and fingerprint["commitment_scheme"] == "hmac-sha256"
    assert fingerprint["commitment"] == input_commitment(key, plain) != plain
    (copied / "private" / RID / "input-commitment.key").unlink()
    code, _, err = _replay(copied, tiny_csv)
    assert code == 2 and "input-commitment.key is missing" in err


def test_release_made_before_commitments_still_replays(copied: Path, tiny_csv: Path) -> None:
    """An older release published the plain input.sha256 and has no commitment key: its replay
    checks the plain hash and rebuilds its manifest as it was (identical)."""
    import hashlib

    release = next(copied.glob(f"releases/*/{RID}"))
    m = Manifest.load(release)
    for field in ("commitment", "commitment_scheme", "commitment_note"):
        del m.data["input"][field]
    m.data["input"]["sha256"] = hashlib.sha256(tiny_csv.read_bytes()).hexdigest()
    m.save(release)
    (copied / "private" / RID / "input-commitment.key").unlink()
    assert run_cli("sign", RID, "--home", str(copied))[0] == 0
    code, report, err = _replay(copied, tiny_csv)
    assert code == 0, (err, report and _differs(report))
    assert report is not None and report["identical"]
    assert not (copied / "private" / RID / "input-commitment.key").exists()


def test_changed_parameter_is_caught(copied: Path, tiny_csv: Path) -> None:
    """ε rewritten from 2 to 1 in both records (and re-signed): the recomputation differs."""
    release = next(copied.glob(f"releases/*/{RID}"))
    m = Manifest.load(release)
    m.data["parameters"]["epsilon"] = 1.0
    m.save(release)
    saved = copied / "private" / RID / "params.json"
    saved.write_text(json.dumps(json.loads(saved.read_text()) | {"epsilon": 1.0}))
    assert run_cli("sign", RID, "--home", str(copied))[0] == 0

    code, report, _ = _replay(copied, tiny_csv)
    assert code == 1 and report is not None
    found = _differs(report)
    assert {("budget", "plan vs ledger"), ("count", "checkpoint")} <= found
    assert {("normalize", "aggregates.tsv"), ("publish", "manifest.json")} <= found
    statuses = {(c["stage"], c["subject"]): c["status"] for c in report["checks"]}
    assert statuses[("parameters", "manifest vs private record")] == "match"


def test_published_parameters_must_match_the_private_record(copied: Path, tiny_csv: Path) -> None:
    """A parameter changed in the manifest alone is reported as a parameter difference."""
    release = next(copied.glob(f"releases/*/{RID}"))
    m = Manifest.load(release)
    m.data["parameters"]["resolution"] = 50
    m.save(release)
    code, report, _ = _replay(copied, tiny_csv)
    assert code == 1 and report is not None
    [check] = [c for c in report["checks"] if c["subject"] == "manifest vs private record"]
    assert check["status"] == "differs" and "resolution" in check["detail"]


def test_refusals_name_what_a_replay_needs(copied: Path, tiny_csv: Path) -> None:
    """No key, an unknown id, unreadable parameters and bad usage: exit 2, nothing left behind."""
    (copied / "private" / RID / "release.key").rename(copied / "elsewhere.key")
    code, _, err = _replay(copied, tiny_csv)
    assert code == 2 and "release.key is missing" in err
    (copied / "elsewhere.key").rename(copied / "private" / RID / "release.key")

    code, _, err = _replay(copied, tiny_csv, rid="no-such-release")
    assert code == 2 and "no published release 'no-such-release'" in err

    release = next(copied.glob(f"releases/*/{RID}"))
    m = Manifest.load(release)
    m.data["parameters"]["from_the_future"] = 1
    m.save(release)
    code, _, err = _replay(copied, tiny_csv)
    assert code == 2 and "not valid for this version of sds" in err
    assert not list((copied / "private").glob("_replay-*"))  # the throwaway home is removed

    assert run_cli("audit", RID, "--input", str(tiny_csv), "--home", str(copied))[0] == 2
    code, _, err = run_cli("audit", RID, "--replay", "--home", str(copied))
    assert code == 2 and "--input PATH" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("synthesizer", "extra"),
    [
        ("histogram-1way", ()),
        ("histogram-nway", ()),
        ("dirichlet-multinomial", ()),
        ("cathist", ()),  # the binned 'age' column: its declared bins are its domain
    ],
)
def test_every_synthesizer_replays_identically(
    synthesizer: str,
    extra: tuple[str, ...],
    tiny_csv: Path,
    tiny_config: Path,
    tmp_path: Path,
    prefect_server: str,
) -> None:
    """A release by each registry synthesizer (one charged fit stage) replays identically."""
    home = tmp_path / "home"
    _release(tiny_csv, tiny_config, home, "synth", "--synthesizer", synthesizer, *extra)
    spent = charges(home)
    code, report, err = _replay(home, tiny_csv, rid="synth")
    assert code == 0, (err, report and _differs(report))
    assert report is not None and report["identical"]
    assert ("fit", "checkpoint") in {(c["stage"], c["subject"]) for c in report["checks"]}
    assert charges(home) == spent


def _reservation() -> Reservation:
    return Reservation("pums", "r1", 1.0, 1e-6, (), "completed", "t", None)


def _row(stage: str) -> ChargeRow:
    return ChargeRow(1, "pums", "r1", stage, "laplace", 0.5, 0.0, None, "t", None, "p", "h")


def test_replay_ledger_only_notes_charges() -> None:
    """Charging notes recorded vs unrecorded stages; closing is a no-op; cancelling is a bug."""
    ledger = ReplayLedger(_reservation(), (_row("count"),))
    ledger.charge("r1", "count")
    ledger.charge("r1", "aggregate-9")
    assert (ledger.replayed, ledger.unrecorded) == (["count"], ["aggregate-9"])
    assert [r.stage for r in ledger.charges(release_id="r1")] == ["count"]
    ledger.complete("r1")
    with pytest.raises(SdsInternalError, match="tried to cancel"):
        ledger.cancel("r1")
    with pytest.raises(SdsInternalError, match="was asked about release 'r2'"):
        ledger.charge("r2", "count")
