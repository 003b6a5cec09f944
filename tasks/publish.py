"""The ``publish`` task: write the release (release_store.publishing) and its Prefect artifacts.

Everything it writes or shows is DP output or public parameters; the manifest turns complete,
anchored to the ledger head, only after every artifact is on disk.
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from release_store import progress, stages
from release_store.publishing import write_release
from release_store.run import ReleaseRun, noise_scales
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
    lengths: dict[int, dict[str, Any]],
) -> str:
    """Publish the release; returns its directory.

    ``lengths`` holds each ``aggregate-k`` result (empty for a registry synthesizer); the
    manifest describes their noise (σ_k, Δ_k, threshold) next to the record count's.
    """
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
        noise=noise_scales(run.params, lengths),
    )
    release_dir = str(run.dirs.release_dir)
    _prefect_artifacts(manifest, release_dir)
    return release_dir


def _prefect_artifacts(manifest: dict[str, Any], release_dir: str) -> None:
    p = manifest["privacy"]
    key = "".join(ch if ch.isalnum() else "-" for ch in manifest["dataset"].lower())
    create_table_artifact(
        key=f"privacy-spend-{key}"[:100],
        table=p["stages"],
        description=f"Privacy spend of release {manifest['release_id']}",
    )
    noise = p.get("noise") or {}
    rows = [
        {
            "counts": f"length {n['length']}",
            "mechanism": n["mechanism"],
            "sigma or scale": n["sigma"],
            "allowed_sensitivity": n["allowed_sensitivity"],
            "threshold": n["threshold"],
            "noise_sd": n["noise_sd"],
        }
        for n in noise.get("by_length", [])
    ]
    if noise.get("record_count"):
        rc = noise["record_count"]
        rows.insert(
            0,
            {
                "counts": "record count",
                "mechanism": rc["mechanism"],
                "sigma or scale": rc["scale"],
                "allowed_sensitivity": 1,
                "threshold": None,
                "noise_sd": rc["noise_sd"],
            },
        )
    if rows:
        create_table_artifact(
            key=f"noise-{key}"[:100],
            table=rows,
            description=f"Noise of release {manifest['release_id']}. {noise['how_to_read']}",
        )
    timing = "\n".join(
        f"| {s['name']} | {s.get('duration_s', '')} |" for s in manifest.get("stages", [])
    )
    files = "\n".join(f"| {n} | `{h[:16]}…` |" for n, h in sorted(manifest["artifacts"].items()))
    create_markdown_artifact(
        key=f"release-{key}"[:100],
        markdown=(
            f"# DP release {manifest['release_id']}\n\n"
            f"(ε={p['epsilon']:.6g}, δ={p['delta']:.3g})-DP, protected records: "
            f"{manifest['input']['rows']}\n\nDirectory: `{release_dir}`\n\n"
            f"| artifact | sha256 |\n|---|---|\n{files}\n\n"
            f"| stage | seconds |\n|---|---|\n{timing}\n"
        ),
        description="DP release summary",
    )
