"""The release flow end to end on a tiny table: contract files, ledger, artifacts, no leaks."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from sds_release.store.config import build_params, load_config
from tests.helpers import N_ROWS, charges, run_cli


@pytest.fixture(scope="module")
def released_run(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, tiny_config: Path, prefect_server: str
) -> tuple[Path, list[tuple]]:
    """One complete release (seed 11, a fixed release id, progress on) and the progress events
    the CLI displayed."""
    from sds_release.store.run import progress

    events: list[tuple] = []

    class Recording(progress.RichProgress):
        def stage(self, text: str) -> None:
            events.append(("stage", text))
            super().stage(text)

        def advance(self, done: int, total: int) -> None:
            events.append(("advance", done, total))
            super().advance(done, total)

    home = tmp_path_factory.mktemp("flowhome")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(progress, "RichProgress", Recording)
        code, out, err = run_cli(
            "release",
            str(tiny_csv),
            "--config",
            str(tiny_config),
            "--home",
            str(home),
            "--seed",
            "11",
            "--release-id",  # the noise is keyed by seed and release id: fixed, so is the test
            "flow-seed-11",
        )
    assert code == 0, err
    last = out.strip().splitlines()[-1]
    assert Path(last).is_dir()
    return Path(last), events


@pytest.fixture(scope="module")
def released(released_run: tuple[Path, list[tuple]]) -> Path:
    """The release directory of ``released_run``."""
    return released_run[0]


def test_progress_of_the_long_stages(released_run: tuple[Path, list[tuple]]) -> None:
    """Stages are shown in order; aggregation advances per length; synthesis per record chunk."""
    path, events = released_run
    stages = [e[1].split(" ")[0] for e in events if e[0] == "stage"]
    assert stages == [
        "reserving",
        "reading",
        "validating",
        "preparing",
        "count",
        "plan",
        "aggregate-1",
        "aggregate-2",
        "normalize",
        "synthesize",
        "evaluate",
        "publish",
    ]
    i = events.index(("stage", "synthesize (synthetic records)"))
    synth = [e for e in events[i:] if e[0] == "advance"]
    assert ("advance", 1, 2) in events[:i] and ("advance", 2, 2) in events[:i]
    n_synthetic = len(pd.read_csv(path / "synthetic.csv"))
    assert synth and synth[-1][1] == n_synthetic  # done = synthetic records made
    assert all(e[2] == synth[0][2] != N_ROWS for e in synth)  # total: the DP target
    assert [e[1] for e in synth] == sorted(e[1] for e in synth)


def test_manifest_anchors_the_ledger_head(released: Path) -> None:
    """The ledger head when the release completed is kept privately; the manifest holds a
    commitment to it (no row number) that `sds audit --verify` opens."""
    from sds_release.store.audit.home import audit_home
    from sds_release.store.ledger.anchor import ANCHOR_FILE
    from sds_release.store.ledger.book import Ledger

    m = json.loads((released / "manifest.json").read_text())
    home = released.parents[2]
    seq, digest = Ledger.open(home).head()  # nothing was written after it
    private = home / "private" / released.name / ANCHOR_FILE
    assert json.loads(private.read_text()) == {"seq": seq, "hash": digest}
    assert "seq" not in m["ledger_head"] and digest not in json.dumps(m)
    assert audit_home(home, verify=True).problems == ()


def test_release_directory_follows_the_contract(released: Path) -> None:
    """manifest.json has the contract keys; every artifact is listed with a matching sha256."""
    from sds_release.store.workspace.integrity import verify_release

    m = json.loads((released / "manifest.json").read_text())
    for key in (
        "release_id",
        "dataset",
        "created_at",
        "status",
        "parameters",
        "privacy",
        "input",
        "stages",
        "artifacts",
        "versions",
    ):
        assert key in m
    assert m["status"] == "complete"
    assert {
        "aggregates.parquet",
        "aggregates.tsv",
        "synthetic.parquet",
        "synthetic.csv",
        "evaluation.json",
        "report.html",
        "explorer.html",
    } <= set(m["artifacts"])
    assert [s["name"] for s in m["stages"]][:7] == [
        "budget",
        "ingest",
        "validate",
        "prepare",
        "count",
        "plan",
        "aggregate-1",
    ]
    assert m["parameters"]["seed"] == "given (withheld)"
    assert verify_release(released) == []


def test_manifest_times_only_the_public_stages(released: Path) -> None:
    """The manifest publishes each stage's name and status, and a duration only for the
    stages whose time is public (budget, plan: no data read); no start or finish time and no
    finished_at. The private timeline has every stage, publish included, with millisecond
    start/finish times and a duration_s."""
    import re
    from datetime import datetime

    from sds_release.store.run.stages import spec

    m = json.loads((released / "manifest.json").read_text())
    assert m["stages"][-1]["name"] == "publish" and "finished_at" not in m
    timed = [s["name"] for s in m["stages"] if "duration_s" in s]
    assert (
        timed
        == ["budget", "plan"]
        == [s["name"] for s in m["stages"] if spec(s["name"]).public_timing]
    )
    assert all(set(s) <= {"name", "status", "artifacts", "duration_s"} for s in m["stages"])
    timeline = json.loads(
        (released.parents[2] / "private" / released.name / "timeline.json").read_text()
    )
    assert [s["name"] for s in timeline["stages"]] == [s["name"] for s in m["stages"]]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", timeline["finished_at"])
    for stage in timeline["stages"]:
        for key in ("started", "finished"):
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", stage[key])
        span = datetime.fromisoformat(stage["finished"]) - datetime.fromisoformat(stage["started"])
        assert stage["duration_s"] >= 0 and abs(span.total_seconds() - stage["duration_s"]) < 0.05


def test_manifest_describes_the_noise_as_the_ledger_charged_it(released: Path) -> None:
    """privacy.noise: the count's Laplace scale is 1/ε of its charge; each length's σ_k gives
    its charged ρ_k (1/(2σ_k²) + the percentile's share); Δ_k and threshold are the stage's."""
    from sds_release.store.run.workdir import ReleaseDirs

    m = json.loads((released / "manifest.json").read_text())
    noise = m["privacy"]["noise"]
    home = released.parents[2]
    rows = {r.stage: r for r in charges(home) if r.release_id == m["release_id"]}
    count = noise["record_count"]
    assert count["mechanism"] == "discrete-laplace"
    assert math.isclose(count["scale"], 1 / rows["count"].epsilon, rel_tol=1e-12)
    assert count["noise_sd"] > count["scale"]  # √2·scale, a little more for integers
    assert [n["length"] for n in noise["by_length"]] == [1, 2]
    dirs = ReleaseDirs(home, "tiny", m["release_id"])
    percentile_shares = set()
    for n in noise["by_length"]:
        assert n["mechanism"] == "discrete-gaussian"
        step = dirs.load_checkpoint(f"aggregate-{n['length']}")
        assert n["allowed_sensitivity"] == step["allowed_sensitivity"] >= 1
        assert n["threshold"] == step["threshold"] >= 0  # length 2: adaptive, η = 1 gives 0
        assert math.isclose(n["noise_sd"], n["sigma"] * math.sqrt(n["allowed_sensitivity"]))
        rho = rows[f"aggregate-{n['length']}"].rho
        percentile_shares.add(round(rho - 1 / (2 * n["sigma"] ** 2), 12))
    assert len(percentile_shares) == 1 and percentile_shares.pop() > 0
    assert "noise_sd" in noise["how_to_read"]
    report = (released / "report.html").read_text()
    assert "Noise of each published count" in report and f"scale {count['scale']:.6g}" in report
    assert html.escape(noise["how_to_read"]) in report
    assert "aggregate_noise" not in m["privacy"]  # one description of the noise


def test_aggregates_and_synthetic_shapes(released: Path) -> None:
    """aggregates.parquet has length/combination/count, the 95% noise half-width of each count
    (1.96 × its length's noise_sd in the manifest), and one column per input column."""
    agg = pd.read_parquet(released / "aggregates.parquet")
    assert list(agg.columns[:4]) == ["length", "combination", "count", "noise_half_width_95"]
    noise = json.loads((released / "manifest.json").read_text())["privacy"]["noise"]
    for entry in noise["by_length"]:
        widths = agg.loc[agg["length"] == entry["length"], "noise_half_width_95"]
        assert widths.notna().all() and len(widths) > 0
        assert widths.eq(round(1.959963984540054 * entry["noise_sd"], 6)).all()
    assert {"sex", "age", "educ", "married", "inc_cat"} <= set(agg.columns)
    assert set(agg["length"]) <= {1, 2}
    tsv = (released / "aggregates.tsv").read_text().splitlines()
    assert tsv[0] == "selections\tprotected_count"
    assert tsv[1].startswith("record_count\t")
    syn = pd.read_csv(released / "synthetic.csv", dtype=str, keep_default_na=False)
    assert list(syn.columns) == ["sex", "age", "educ", "married", "inc_cat"]
    assert set(syn["age"]) <= {"", "0-30", "30-50", "50-70", "70-121"}


def test_ledger_charges_match_the_release(released: Path) -> None:
    """One charge per noisy stage, summing to the release's ε."""
    home = released.parents[2]
    rows = charges(home)
    assert [r.stage for r in rows] == ["count", "aggregate-1", "aggregate-2"]
    assert math.isclose(math.fsum(r.epsilon for r in rows), 2.0, rel_tol=1e-9)
    assert run_cli("audit", "--verify", "--home", str(home))[0] == 0


def test_no_secret_in_the_release(released: Path) -> None:
    """Neither the key, the seed file nor the true record count appears in a published file."""
    from sds_release.store.workspace.integrity import forbidden_content_check

    home = released.parents[2]
    rid = released.name
    key = (home / "private" / rid / "release.key").read_bytes().hex()
    m = json.loads((released / "manifest.json").read_text())
    assert m["input"]["rows"] != N_ROWS  # the seed gives a noisy count different from n
    assert forbidden_content_check(released, secrets=[key, str(N_ROWS)]) == []
    assert (home / "private" / rid / "validation-input.json").is_file()
    assert not (released / "validation-input.json").exists()


def test_evaluation_against_the_data_is_private(released: Path) -> None:
    """evaluation.json holds only the agreement of the published files (marked as such); SDS's
    evaluation against the sensitive data is in the private custodian report (0600)."""
    import stat

    from sds_release.store.workspace.integrity import forbidden_content_check

    home, rid = released.parents[2], released.name
    assert forbidden_content_check(released, secrets=[str(N_ROWS)]) == []
    ev = json.loads((released / "evaluation.json").read_text())
    assert ev["computed_from_sensitive_data"] is False
    assert ev["computed_from"] == [
        "aggregates.parquet",
        "synthetic.parquet",
        "manifest.json privacy.noise",
    ]
    assert set(ev["metrics"]["by_length"]) == {"1", "2"}  # R = 2
    text = json.dumps(ev["metrics"])
    for word in ("suppressed", "fabricated", "preservation", "sensitive_risk", "expansion"):
        assert word not in text
    private = home / "private" / rid
    for name in ("custodian-report.html", "custodian-evaluation.json"):
        assert stat.S_IMODE((private / name).stat().st_mode) == 0o600
    full = json.loads((private / "custodian-evaluation.json").read_text())
    assert set(full["marginal_fidelity"]["tvd_mean_by_order"]) == {"1", "2", "3"}
    page = (private / "custodian-report.html").read_text()
    assert "PRIVATE: computed from the sensitive data" in page and "fig-suppressed" in page
    assert "custodian" not in " ".join(p.name for p in released.iterdir())


def test_prefect_artifacts_are_created(released: Path) -> None:
    """Summary, spend and by-length tables, links to report and explorer, finished progress."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    keys = [
        "release-tiny",
        "privacy-spend-tiny",
        "by-length-tiny",
        "report-tiny",
        "explorer-tiny",
        "noise-tiny",
        "aggregate-progress-tiny",
        "synthesize-progress-tiny",
    ]
    by_key: dict[str, list[str]] = {}
    with get_client(sync_client=True) as client:
        # one key at a time, newest first: other modules release "tiny" too, and the server
        # answers one page (its default limit) of all artifacts, which ours may not be on
        for key in keys:
            for a in client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
                sort=ArtifactSort.CREATED_DESC,
            ):
                by_key.setdefault(key, []).append(str(a.data))
        seen = {a.key or "" for a in client.read_artifacts()}
    assert set(keys) <= set(by_key)
    assert all(re.fullmatch(r"[a-z0-9-]+", k) for k in seen if k)
    assert any((released / "report.html").as_uri() in d for d in by_key["report-tiny"])
    assert any((released / "explorer.html").as_uri() in d for d in by_key["explorer-tiny"])
    rows = json.loads((released / "manifest.json").read_text())["input"]["rows"]
    ours = [d for d in by_key["release-tiny"] if released.name in d]
    assert len(ours) == 1 and f"| protected (DP) record count | {rows:,} |" in ours[0]
    assert "before this release" not in ours[0] and "[budget-tiny]" in ours[0]  # linked
    assert "| stage | seconds |" in ours[0] and "| count | not public |" in ours[0]
    assert re.search(r"\| plan \| \d+(\.\d+)? \|", ours[0])  # public stage times only
    assert "synthetic records vs DP aggregates" in ours[0] and "sensitive" not in ours[0]
    by_length = next(d for d in by_key["by-length-tiny"] if "within_noise_95_pct" in d)
    assert "suppressed" not in by_length and "preservation" not in by_length
    assert 100.0 in [float(d) for d in by_key["synthesize-progress-tiny"]]  # reached 100%


def test_evaluate_a_release_with_its_config(
    released: Path, tiny_csv: Path, tiny_config: Path
) -> None:
    """`sds evaluate --config` bins the original like the release; the comparison is sane."""
    code, out, err = run_cli(
        "evaluate",
        str(tiny_csv),
        str(released / "synthetic.csv"),
        "--config",
        str(tiny_config),
        "--reporting-length",
        "2",
        "--json",
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["differentially_private"] is False
    assert result["records"]["original"] == N_ROWS  # evaluation is for the data owner
    empty = result["marginal_fidelity"]["empty_share_by_column"]["age"]
    assert empty["original"] == 0.0 and empty["synthetic"] < 0.5  # bin labels match
    assert result["marginal_fidelity"]["tvd_mean_by_order"]["1"] < 0.5
    assert 0.0 <= result["aggregates"]["by_length"]["1"]["suppressed_pct"] < 100.0


def test_config_values_lose_to_the_command_line(tiny_config: Path) -> None:
    """build_params: config values apply, explicit overrides win, None overrides are ignored."""
    cfg = load_config(tiny_config)
    p = build_params(cfg, {"input": "x.csv", "epsilon": 0.5, "delta": None})
    assert p.epsilon == 0.5
    assert p.reporting_length == 2
    assert p.dataset == "tiny"
    assert p.resolved_delta() < 1e-5  # 1/(N ln N) for the schema's max_rows


def test_audit_verify_reports_tampering(released: Path, tmp_path: Path) -> None:
    """Editing a published file makes `sds audit --verify` fail and name the file."""
    import shutil

    home = tmp_path / "copy"
    shutil.copytree(released.parents[2], home)
    target = home / "releases" / "tiny" / released.name / "synthetic.csv"
    target.write_text(target.read_text() + "1,0-30,9,1,less 10k\n")
    code, out, _ = run_cli("audit", "--verify", "--home", str(home))
    assert code == 1
    assert "synthetic.csv" in out


def test_registry_synthesizer_release(
    tiny_csv: Path, tiny_config: Path, tmp_path: Path, prefect_server: str
) -> None:
    """A non-SDS synthesizer is one charged fit stage; the release is complete and verified."""
    home = tmp_path / "home"
    code, out, err = run_cli(
        "release",
        str(tiny_csv),
        "--config",
        str(tiny_config),
        "--home",
        str(home),
        "--synthesizer",
        "histogram-1way",
        "--seed",
        "2",
        "--quiet",
    )
    assert code == 0, err
    shown = [line for line in err.splitlines() if not line.startswith("sds: warning")]
    assert not any("release " in line for line in shown)  # --quiet: no progress display
    m = json.loads((Path(out.strip().splitlines()[-1]) / "manifest.json").read_text())
    assert "fit" in [s["name"] for s in m["stages"]]
    noise = m["privacy"]["noise"]
    assert noise["by_length"] == [] and noise["record_count"] is None and noise["how_to_read"]
    agg = pd.read_parquet(Path(out.strip().splitlines()[-1]) / "aggregates.parquet")
    assert agg["noise_half_width_95"].isna().all()  # no per-length noise described: no bar
    rows = charges(home)
    assert rows and all(r.stage.startswith("histogram-1way") for r in rows)
    assert math.fsum(r.epsilon for r in rows) <= 2.0 + 1e-12
    assert run_cli("audit", "--verify", "--home", str(home))[0] == 0
