"""The ``publish`` task: write the release (release_store.publishing), sign it, and show it.

Everything it writes or shows is DP output or public parameters; the manifest turns complete,
anchored to the ledger head, only after every artifact is on disk; then the home's key signs
the manifest (release_store.signing: ``manifest.sig``, ``signing-key.pub``).
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from release_store import progress, stages
from release_store.publishing import write_release
from release_store.run import ReleaseRun
from release_store.signing import sign_release, signing_key
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
    aggregate_noise: dict[str, Any] | None = None,
) -> str:
    """Publish and sign the release; returns its directory."""
    progress.stage("publish")
    signing_key(run.home)  # created or read before the release turns complete, so it can fail
    manifest = write_release(
        run,
        parameters=run.params.public_dict() | {"release_id": run.release_id},
        input_sha256=input_sha256,
        aggregates=aggregates,
        synthetic=synthetic,
        evaluation=evaluation,
        validation=validation,
        stages=stages_done,
        aggregate_noise=aggregate_noise,
    )
    release_dir = str(run.dirs.release_dir)
    signed_by = sign_release(run.home, release_dir)
    _prefect_artifacts(manifest, release_dir, signed_by)
    return release_dir


def _prefect_artifacts(manifest: dict[str, Any], release_dir: str, signed_by: str) -> None:
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
            f"Signed (Ed25519, `manifest.sig`) by key `{signed_by}`\n\n"
            f"| artifact | sha256 |\n|---|---|\n{files}\n"
        ),
        description="DP release summary",
    )
