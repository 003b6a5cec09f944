"""Resume after SIGKILL inside a stage: identical artifacts, nothing charged twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sds_release.store.workspace.files import sha256_file
from tests.helpers import charges, killed_cli, run_cli

COMPARED = (
    "aggregates.parquet",
    "aggregates.tsv",
    "synthetic.parquet",
    "synthetic.csv",
    "evaluation.json",
    "validation.json",
)
RID = "resume-test"


def _args(tiny_csv: Path, tiny_config: Path, home: Path) -> list[str]:
    return [
        "release",
        str(tiny_csv),
        "--config",
        str(tiny_config),
        "--home",
        str(home),
        "--release-id",
        RID,
        "--seed",
        "5",
        "--quiet",
    ]


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, tiny_config: Path, prefect_server: str
) -> dict[str, str]:
    """Artifact hashes of an uninterrupted release with the same id and seed."""
    home = tmp_path_factory.mktemp("uninterrupted")
    code, out, err = run_cli(*_args(tiny_csv, tiny_config, home))
    assert code == 0, err
    rel = Path(out.strip().splitlines()[-1])
    return {name: sha256_file(rel / name) for name in COMPARED}


def _killed_run(stage: str, tiny_csv: Path, tiny_config: Path, home: Path, api_url: str) -> None:
    killed_cli(stage, _args(tiny_csv, tiny_config, home), api_url)


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["count", "aggregate-2", "synthesize"])
def test_resume_after_kill_is_identical(
    stage: str,
    reference: dict[str, str],
    tiny_csv: Path,
    tiny_config: Path,
    tmp_path: Path,
    prefect_server: str,
) -> None:
    """Killed inside ``stage`` then resumed: same artifacts, each stage charged once, and the
    resumed release replays identically."""
    home = tmp_path / "home"
    _killed_run(stage, tiny_csv, tiny_config, home, prefect_server)
    charged = [r.stage for r in charges(home)]
    assert stage in charged or stage == "synthesize"  # charged before the noise was drawn
    manifest = json.loads(next(home.glob(f"releases/*/{RID}/manifest.json")).read_text())
    assert manifest["status"] == "running"

    if stage == "aggregate-2":  # a changed input is refused on resume
        state_path = home / "private" / RID / "state.json"
        state = json.loads(state_path.read_text())
        state["fingerprint"] = "0" * 64
        state_path.write_text(json.dumps(state))
        code, _, err = run_cli("resume", RID, "--home", str(home), "--quiet")
        assert code == 1 and "input of release" in err and "changed" in err
        state_path.write_text(json.dumps({**state, "fingerprint": None}))

    code, out, err = run_cli("resume", RID, "--home", str(home), "--quiet")
    assert code == 0, err
    rel = Path(out.strip().splitlines()[-1])
    assert {name: sha256_file(rel / name) for name in COMPARED} == reference
    stages = [r.stage for r in charges(home)]
    assert stages == ["count", "aggregate-1", "aggregate-2"]

    # the resumed release replays identically from its key and input (nothing charged)
    code, out, err = run_cli(
        "audit", RID, "--replay", "--input", str(tiny_csv), "--home", str(home), "--json"
    )
    assert code == 0, out + err
    assert json.loads(out)["identical"]
    assert [r.stage for r in charges(home)] == stages
