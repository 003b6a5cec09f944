"""``sds release --executor dask``: a scheduler and 2 workers started with the dask CLI on
127.0.0.1 give the same artifact hashes as the local release; a dead address charges nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed")

import pyarrow.parquet as pq

from sds_core.synthesis.generator import AUTO_BATCH_RECORDS
from sds_release.store.workspace.files import sha256_file
from tests.helpers import PROJECT, charges, complete_releases, killed_cli, run_cli

COMPARED = ("aggregates.parquet", "aggregates.tsv", "synthetic.parquet", "evaluation.json")
DASK = Path(sys.executable).parent / "dask"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _args(csv: Path, config: Path, home: Path, rid: str, *extra: str) -> list[str]:
    return [
        "release",
        str(csv),
        "--config",
        str(config),
        "--home",
        str(home),
        "--release-id",
        rid,
        "--seed",
        "11",
        "--quiet",
        *extra,
    ]


@pytest.fixture(scope="module")
def cli_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``dask scheduler`` + 2 ``dask worker`` processes on 127.0.0.1; yields the address."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = tmp_path_factory.mktemp("dask-logs")
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    common = {"cwd": PROJECT, "env": env, "stderr": subprocess.STDOUT}
    procs = [
        subprocess.Popen(
            [
                str(DASK),
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--dashboard-address",
                ":0",
                "--no-show",
            ],
            stdout=open(logs / "scheduler.log", "w"),
            **common,
        )
    ]
    from distributed import Client

    try:
        for i in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        str(DASK),
                        "worker",
                        address,
                        "--nthreads",
                        "1",
                        "--nworkers",
                        "1",
                        "--host",
                        "127.0.0.1",
                        "--dashboard-address",
                        ":0",
                        "--no-nanny",
                    ],
                    stdout=open(logs / f"worker{i}.log", "w"),
                    **common,
                )
            )
        with Client(address, timeout=60) as c:
            c.wait_for_workers(2, timeout=120)
        yield address
    finally:
        # one at a time, the workers first: a worker SIGTERMed while the scheduler is closing
        # gets both closes at once and hangs (30 s until killed, distributed 2026.8)
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_release_on_a_dask_cli_cluster_has_the_local_hashes(
    tiny_csv: Path,
    tiny_config: Path,
    tmp_path: Path,
    prefect_server: str,
    cli_cluster: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Same seed and id, local vs ``--executor dask --dask-address`` vs ``--executor dask``
    alone (an embedded LocalCluster): identical artifacts, also with ``--synthetic-records``
    large enough for 2 synthesis batches (on the workers)."""
    monkeypatch.delenv("SDS_DASK_ADDRESS", raising=False)
    hashes = []
    for name, extra in (
        ("local", ()),
        ("dask", ("--executor", "dask", "--dask-address", cli_cluster)),
        ("embedded", ("--executor", "dask")),
    ):
        home = tmp_path / name
        more = ("--synthetic-records", str(AUTO_BATCH_RECORDS))
        code, out, err = run_cli(*_args(tiny_csv, tiny_config, home, "dask-same", *extra, *more))
        assert code == 0, err
        rel = Path(out.strip().splitlines()[-1])
        assert pq.read_metadata(rel / "synthetic.parquet").num_rows == AUTO_BATCH_RECORDS
        hashes.append({n: sha256_file(rel / n) for n in COMPARED})
    assert hashes[0] == hashes[1] == hashes[2]
    from distributed import Client

    with Client(cli_cluster, timeout=30) as c:  # the counting did run on the cluster
        ran = c.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    # the synthesis batches, then the shuffled chunks, built on the workers
    assert {"group_counts", "group_presence", "batch_codes", "assemble"} <= set(ran)


def test_unreachable_dask_address_fails_before_any_charge(
    tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    """Nothing listens at the address: a clear error naming --dask-address; no ledger charge."""
    dead = f"tcp://127.0.0.1:{_free_port()}"
    code, _, err = run_cli(
        *_args(
            tiny_csv, tiny_config, home, "dask-dead", "--executor", "dask", "--dask-address", dead
        )
    )
    assert code != 0
    assert "no Dask scheduler answers" in err and "--dask-address" in err
    assert charges(home) == []


def test_a_dask_address_alone_runs_on_that_cluster(
    tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    """--dask-address without --executor names the cluster to count on (issue #37): the
    release contacts it (nobody answers here: refused naming the address, nothing charged)
    instead of running locally."""
    dead = f"tcp://127.0.0.1:{_free_port()}"
    code, _, err = run_cli(
        *_args(tiny_csv, tiny_config, home, "dask-implied", "--dask-address", dead)
    )
    assert code != 0
    assert f"no Dask scheduler answers at dask_address '{dead}'" in err
    assert charges(home) == [] and complete_releases(home) == []


@pytest.mark.slow
def test_dask_release_killed_then_resumed_on_the_cluster_is_identical(
    tiny_csv: Path,
    tiny_config: Path,
    tmp_path: Path,
    prefect_server: str,
    cli_cluster: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--executor dask`` killed (SIGKILL) inside aggregate-2, then ``sds resume``d: the same
    artifacts as an uninterrupted local release of the same id and seed, each stage charged once
    (the resumed run loads the finished stages' checkpoints and counts the rest on the cluster)."""
    monkeypatch.delenv("SDS_DASK_ADDRESS", raising=False)
    rid = "dask-resume"
    code, out, err = run_cli(*_args(tiny_csv, tiny_config, tmp_path / "local", rid))
    assert code == 0, err
    local = Path(out.strip().splitlines()[-1])
    reference = {n: sha256_file(local / n) for n in COMPARED}

    home = tmp_path / "dask"
    dask_args = ("--executor", "dask", "--dask-address", cli_cluster)
    killed_cli("aggregate-2", _args(tiny_csv, tiny_config, home, rid, *dask_args), prefect_server)
    assert [c.stage for c in charges(home)] == ["count", "aggregate-1", "aggregate-2"]
    assert not list(home.glob(f"releases/*/{rid}/synthetic.parquet"))

    code, out, err = run_cli("resume", rid, "--home", str(home), "--quiet")
    assert code == 0, err
    resumed = Path(out.strip().splitlines()[-1])
    assert {n: sha256_file(resumed / n) for n in COMPARED} == reference
    assert [c.stage for c in charges(home)] == ["count", "aggregate-1", "aggregate-2"]
    manifest = json.loads((resumed / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["parameters"]["executor"] == "dask"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("synthesis", "kill_at", "whole_checkpoint"),
    [
        ("records", "synthesize", False),
        ("records", "evaluate", False),
        ("model", "evaluate", False),
        ("model", "evaluate", True),
        ("reconcile", "evaluate", False),
    ],
)
def test_dask_synthetic_chunks_killed_then_resumed_are_identical(
    tiny_csv: Path,
    tiny_config: Path,
    tmp_path: Path,
    prefect_server: str,
    cli_cluster: str,
    monkeypatch: pytest.MonkeyPatch,
    synthesis: str,
    kill_at: str,
    whole_checkpoint: bool,
) -> None:
    """3,500 synthetic records in 4 parts, on the workers (SDS's records, the consistent
    model's or the reconciled records, made on one worker): killed right after synthesis (its
    chunk files written, the stage not yet recorded: re-synthesized) or after the output gate
    (the chunks come back from their checkpoint files; or from the one whole table a release
    checkpointed before the model's records were made on the workers), then resumed: the
    local release's bytes, nothing charged twice."""
    monkeypatch.delenv("SDS_DASK_ADDRESS", raising=False)
    config = tmp_path / "parts.toml"
    text = tiny_config.read_text()
    if synthesis == "model":
        text = text.replace('synthesis = "records"', 'synthesis = "model"')
    elif synthesis == "reconcile":
        text = "reconcile_one_way = true\n" + text
    config.write_text("synthetic_part_records = 1000\n" + text)
    rid, more = "dask-chunks", ("--synthetic-records", "3500")
    code, out, err = run_cli(*_args(tiny_csv, config, tmp_path / "local", rid, *more))
    assert code == 0, err
    local = json.loads((Path(out.strip().splitlines()[-1]) / "manifest.json").read_text())

    home = tmp_path / "dask"
    dask_args = ("--executor", "dask", "--dask-address", cli_cluster, *more)
    killed_cli(kill_at, _args(tiny_csv, config, home, rid, *dask_args), prefect_server)
    assert list(home.rglob("checkpoints/synthesize/chunk-*.npy"))
    if whole_checkpoint:  # the checkpoint the code before wrote: one PreparedTable
        _whole_synthesize_checkpoint(home, rid)
    code, out, err = run_cli("resume", rid, "--home", str(home), "--quiet")
    assert code == 0, err
    resumed = json.loads((Path(out.strip().splitlines()[-1]) / "manifest.json").read_text())
    skip = {"report.html"}
    assert {n: h for n, h in resumed["artifacts"].items() if n not in skip} == {
        n: h for n, h in local["artifacts"].items() if n not in skip
    }
    assert len(resumed["synthetic_parts"]["parts"]) == 4
    assert [c.stage for c in charges(home)] == ["count", "aggregate-1", "aggregate-2"]


def _whole_synthesize_checkpoint(home: Path, rid: str) -> None:
    """The release's chunked synthesize checkpoint replaced by the one whole ``PreparedTable``
    the model's and reconciled Dask releases checkpointed before their records were made on
    the workers (the same records)."""
    from sds_core.data.table import PreparedTable
    from sds_release.store.cluster.synthesis import StoredSynthetic
    from sds_release.store.run.workdir import ReleaseDirs

    dirs = ReleaseDirs(home, "tiny", rid)
    stored = dirs.load_checkpoint("synthesize")
    assert isinstance(stored, StoredSynthetic)
    table = stored.table(dirs.checkpoint_dir)
    state_file = dirs.private_dir / "state.json"
    state = json.loads(state_file.read_text())
    del state["stages"]["synthesize"]
    state_file.write_text(json.dumps(state))
    dirs.save_checkpoint("synthesize", table)
    assert isinstance(dirs.load_checkpoint("synthesize"), PreparedTable)
