"""The ``publish`` task: write the release (release_store.publishing) and its Prefect artifacts.

Everything it writes or shows is DP output or public parameters; the manifest turns complete,
anchored to the ledger head, only after every artifact is on disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from release_store import progress, stages
from release_store.budget_view import artifact_key
from release_store.publishing import write_release
from release_store.run import ReleaseRun
from release_store.stage_log import stage_done
from sds_core.data.table import PreparedTable
from sds_core.marginals.aggregates import AggregateSet


@task(name=stages.PUBLISH, persist_result=False)
def publish_release(
    run: ReleaseRun,
    *,
    input_sha256: str,
    aggregates: AggregateSet,
    synthetic: PreparedTable,
    evaluation: dict[str, Any],
    validation: dict[str, Any],
    stages_done: list[dict[str, Any]],
) -> str:
    """Publish the release; returns its directory."""
    progress.stage("publish")
    manifest = write_release(
        run,
        parameters=run.params.public_dict() | {"release_id": run.release_id},
        input_sha256=input_sha256,
        aggregates=aggregates,
        synthetic=synthetic,
        evaluation=evaluation,
        validation=validation,
        stages=stages_done,
    )
    release_dir = str(run.dirs.release_dir)
    _prefect_artifacts(manifest, release_dir)
    p = manifest["privacy"]
    stage_done(
        get_run_logger(),
        run,
        stages.PUBLISH,
        f"{len(manifest['artifacts'])} files published to {release_dir}; the release is "
        f"(ε={p['epsilon']:.6g}, δ={p['delta']:.3g})-DP",
    )
    return release_dir


def _prefect_artifacts(manifest: dict[str, Any], release_dir: str) -> None:
    p = manifest["privacy"]
    key = "".join(ch if ch.isalnum() else "-" for ch in manifest["dataset"].lower())
    create_table_artifact(
        key=f"privacy-spend-{key}"[:100],
        table=p["stages"],
        description=f"Privacy spend of release {manifest['release_id']}",
    )
    files = "\n".join(f"| {n} | `{h[:16]}…` |" for n, h in sorted(manifest["artifacts"].items()))
    create_markdown_artifact(
        key=f"release-{key}"[:100],
        markdown=(
            f"# DP release {manifest['release_id']}\n\n"
            f"(ε={p['epsilon']:.6g}, δ={p['delta']:.3g})-DP, protected records: "
            f"{manifest['input']['rows']}\n\nDirectory: `{release_dir}`\n\n"
            f"{_report_links(manifest, release_dir)}\n\n"
            f"| artifact | sha256 |\n|---|---|\n{files}\n"
        ),
        description="DP release summary",
    )


def _report_links(manifest: dict[str, Any], release_dir: str) -> str:
    """Markdown links to the release's report and to the dataset's budget table artifact."""
    report = Path(release_dir, "report.html").as_uri()
    budget = artifact_key("budget", manifest["dataset"])
    return (
        f"Report: [report.html]({report}) · Budget of the dataset: "
        f"[{budget}](/artifacts/key/{budget})"
    )
