"""The disk under a release: full (ENOSPC) while it writes a checkpoint, the ledger or the
published files; a checkpoint truncated between a crash and the resume.

For a full disk, the home is a size-limited tmpfs (mounting one needs root: skipped otherwise).
A real ``sds release`` process pauses at the moment (``SDS_TEST_PAUSE_AT``); the test fills the
disk and lets it go on. The release must fail saying the disk is full and to ``sds resume``,
with nothing looking published; once the space is freed, ``sds resume`` gives the bytes of an
uninterrupted release with the same id and seed, no stage is charged twice and ``sds audit
--verify`` passes. A truncated checkpoint is computed again from the release key on resume, to
the very bytes recorded when the stage first finished (or resume refuses, naming the file).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sds_release.store.run.faults import PAUSE_ENV, PAUSE_FILE
from sds_release.store.workspace.files import sha256_file
from tests.helpers import PROJECT, charges, complete_releases, killed_cli, run_cli

RID = "enospc-test"
STAGES = ["count", "aggregate-1", "aggregate-2"]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="mounts a tmpfs")]


def _args(tiny_csv: Path, tiny_config: Path, home: Path) -> list[str]:
    return [
        "release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home),
        "--release-id", RID, "--seed", "5", "--quiet",
    ]  # fmt: skip


def _artifact_hashes(release_dir: Path) -> dict[str, str]:
    """The manifest's artifacts and their files' sha256, but report.html (it shows times)."""
    manifest = json.loads((release_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    names = sorted(n for n in manifest["artifacts"] if n != "report.html")
    assert names, manifest
    return {name: sha256_file(release_dir / name) for name in names}


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, tiny_config: Path, prefect_server: str
) -> dict[str, str]:
    """Artifact hashes of an uninterrupted release with the same id and seed."""
    home = tmp_path_factory.mktemp("uninterrupted")
    code, out, err = run_cli(*_args(tiny_csv, tiny_config, home))
    assert code == 0, err
    return _artifact_hashes(Path(out.strip().splitlines()[-1]))


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    """A home on its own 32 MiB tmpfs (unmounted afterwards)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs as the home needs root")
    home = tmp_path / "home"
    home.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "tmpfs", str(home)]
    done = subprocess.run(mount, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs ({done.stderr.strip()})")
    try:
        yield home
    finally:
        if subprocess.run(["umount", str(home)], capture_output=True, timeout=60).returncode:
            subprocess.run(["umount", "-l", str(home)], capture_output=True, timeout=60)


def _fill(path: Path) -> None:
    """Append to ``path`` until the disk is full (ENOSPC), down to the last page."""
    with open(path, "ab", buffering=0) as f:
        for chunk in (1 << 20, 4096):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e


def _release_on_full_disk(
    args: list[str], point: str, home: Path, api_url: str, logs: Path
) -> tuple[int, str]:
    """``sds ARGS`` paused at ``point``; the disk is filled, then it goes on. Returns its exit
    status and stderr."""
    env = {**os.environ, PAUSE_ENV: point, "PREFECT_API_URL": api_url, "SDS_RUNNER": "off"}
    marker = home / "private" / RID / PAUSE_FILE
    with open(logs / "out", "wb") as out, open(logs / "err", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sds_release.flows.cli", *args],
            cwd=PROJECT,
            env=env,
            stdout=out,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + 600
            while not marker.exists():
                assert proc.poll() is None, (logs / "err").read_text()[-3000:]
                assert time.monotonic() < deadline, f"the release never reached {point}"
                time.sleep(0.05)
            _fill(home / "filler")
            marker.unlink()
            _fill(home / "filler")  # the page the marker held
            code = proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return code, (logs / "err").read_text()


@pytest.mark.parametrize(
    ("what", "point", "named"),
    [
        ("checkpoint", "count", "No space left on device"),
        ("ledger", "charge:aggregate-1", "the SQLite ledger: database or disk is full"),
        ("published", "publish", "No space left on device"),
    ],
)
def test_disk_full_fails_resumably_and_resume_is_identical(
    what: str,
    point: str,
    named: str,
    reference: dict[str, str],
    small_home: Path,
    tiny_csv: Path,
    tiny_config: Path,
    tmp_path: Path,
    prefect_server: str,
) -> None:
    """The disk fills while the release writes its ``what``: it fails with a one-paragraph
    message (the disk is full, `sds resume`), nothing looks published, no stage is charged
    twice; after freeing space, resume gives the uninterrupted release's bytes."""
    home = small_home
    args = _args(tiny_csv, tiny_config, home)
    code, err = _release_on_full_disk(args, point, home, prefect_server, tmp_path)
    assert code == 1, err
    assert "Traceback" not in err, err
    assert "disk" in err and "full" in err, err
    assert f"sds resume {RID}" in err and named in err, err  # what was being written

    assert complete_releases(home) == []
    [release_dir] = home.glob(f"releases/*/{RID}")
    manifest = json.loads((release_dir / "manifest.json").read_text())
    assert manifest["status"] != "complete" and not manifest.get("artifacts")
    assert [p.name for p in release_dir.iterdir()] == ["manifest.json"]
    charged = [r.stage for r in charges(home)]
    assert charged == (["count"] if what != "published" else STAGES)  # whole or absent

    (home / "filler").unlink()
    code, out, err = run_cli("resume", RID, "--home", str(home), "--quiet")
    assert code == 0, err
    assert _artifact_hashes(Path(out.strip().splitlines()[-1])) == reference
    assert [r.stage for r in charges(home)] == STAGES
    code, out, err = run_cli("audit", "--verify", "--home", str(home))
    assert code == 0, out + err


@pytest.mark.slow
def test_truncated_checkpoints_are_computed_again_to_the_same_bytes(
    reference: dict[str, str],
    tiny_csv: Path,
    tiny_config: Path,
    tmp_path: Path,
    prefect_server: str,
) -> None:
    """Killed in ``evaluate``, then every finished stage's checkpoint truncated: resume
    recomputes them from the release key to their recorded sha256 (four drew noise),
    charges nothing again and publishes the uninterrupted release's bytes. A recomputation that
    gives other bytes is refused, naming the file and what to do."""
    home = tmp_path / "home"
    killed_cli("evaluate", _args(tiny_csv, tiny_config, home), prefect_server)
    private = home / "private" / RID
    state_file = private / "state.json"
    state = json.loads(state_file.read_text())
    damaged = ["count", "aggregate-1", "aggregate-2", "normalize", "synthesize"]
    recorded = {s: state["stages"][s]["sha256"] for s in damaged}
    for stage in damaged:
        path = private / "checkpoints" / f"{stage}.pkl"
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    # a recomputation that does not give the recorded bytes is refused (as after an upgrade)
    other = {
        **state,
        "stages": {**state["stages"], "count": {**state["stages"]["count"], "sha256": "0" * 64}},
    }
    state_file.write_text(json.dumps(other))
    code, _, err = run_cli("resume", RID, "--home", str(home), "--quiet")
    assert code == 1
    assert "count.pkl" in err and "other bytes" in err and f"sds resume {RID}" in err, err
    assert [r.stage for r in charges(home)] == STAGES and complete_releases(home) == []

    state_file.write_text(json.dumps(state))
    code, out, err = run_cli("resume", RID, "--home", str(home), "--quiet")
    assert code == 0, err
    for stage in damaged:
        assert f"{stage}.pkl" in err  # the warning names each damaged file
        assert sha256_file(private / "checkpoints" / f"{stage}.pkl") == recorded[stage]
    assert {
        s: json.loads(state_file.read_text())["stages"][s]["sha256"] for s in damaged
    } == recorded
    assert _artifact_hashes(Path(out.strip().splitlines()[-1])) == reference
    assert [r.stage for r in charges(home)] == STAGES
    code, out, err = run_cli("audit", "--verify", "--home", str(home))
    assert code == 0, out + err
