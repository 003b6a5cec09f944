"""The ``publish`` task: write the release (sds_release.store.publish.artifacts), sign it, and show
it.

Only DP output, public parameters and post-processing of them: the manifest turns complete
(anchored to the ledger head) after every artifact is on disk, then the home's key signs it.
Prefect artifacts, keyed ``<what>-<dataset>``: links to the report and the explorer, spend and
by-length tables, a summary; like the release files, they are computed from the published files
only (the evaluation against the sensitive data stays in the private custodian report).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)

from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.plan import SdsPlan
from sds_release.store.audit.signing import sign_release, signing_key
from sds_release.store.executor.base import Executor
from sds_release.store.ledger.budget_view import artifact_key as budget_artifact_key
from sds_release.store.ledger.budget_view import dataset_key
from sds_release.store.publish.artifacts import write_release
from sds_release.store.report.inputs import count_sd
from sds_release.store.run import progress, stages, timing
from sds_release.store.run.release_run import ReleaseRun
from sds_release.store.run.stage_log import stage_done
from sds_release.tasks.options import task_logger


@task(name=stages.PUBLISH, persist_result=False)
def publish_release(
    run: ReleaseRun,
    *,
    executor: Executor[Any, Any],
    input_sha256: str,
    aggregates: AggregateSet,
    synthetic: Any,
    evaluation: dict[str, Any],
    validation: dict[str, Any],
    stages_done: list[dict[str, Any]],
    noise: dict[str, Any] | None = None,
    plan: SdsPlan | None = None,
) -> str:
    """Publish and sign the release; returns its directory.

    ``input_sha256`` is published only as a keyed commitment, and ``evaluation`` (computed from
    the sensitive data) only in the private custodian report. ``noise`` is the manifest's
    ``privacy.noise`` (:func:`sds_release.store.run.release_run.noise_scales`: σ_k, Δ_k, threshold
    and noise_sd per length, the record count's scale); None rebuilds it from the aggregate-k
    checkpoints. ``plan`` is the SDS plan (R, split, synthesis chosen from the DP record count),
    published in the manifest with its reason. The synthetic files are streamed from the
    records' chunks, brought here one at a time from where ``executor`` holds them.
    """
    progress.stage("publish")
    signing_key(run.home)  # created or read before the release turns complete, so it can fail
    manifest = write_release(
        run,
        parameters=run.params.public_dict() | {"release_id": run.release_id},
        input_sha256=input_sha256,
        aggregates=aggregates,
        synthetic=synthetic,
        synthetic_chunks=executor.chunks(synthetic, run.params.synthetic_part_records),
        evaluation=evaluation,
        validation=validation,
        stages=stages_done,
        noise=noise,
        plan=plan,
    )
    release_dir = str(run.dirs.release_dir)
    signed_by = sign_release(run.home, release_dir)
    try:  # the release is complete and its budget closed: the UI's copies never undo that
        with timing.span("publish:prefect-artifacts"):
            _prefect_artifacts(manifest, Path(release_dir), aggregates, signed_by)
    except Exception as e:  # e.g. the Prefect server stopped answering (after the retries)
        task_logger().warning(
            "the Prefect artifacts of release %s were not created: %s: %s",
            run.release_id,
            type(e).__name__,
            e,
        )
    p = manifest["privacy"]
    stage_done(
        task_logger(),
        run,
        stages.PUBLISH,
        f"{len(manifest['artifacts'])} files published to {release_dir}; the release is "
        f"(ε={p['epsilon']:.6g}, δ={p['delta']:.3g})-DP",
    )
    return release_dir


def _prefect_artifacts(
    manifest: dict[str, Any],
    folder: Path,
    aggregates: AggregateSet,
    signed_by: str,
) -> None:
    """Links to the report and the explorer, the summary, and tables with stable keys."""
    key = dataset_key(manifest["dataset"])
    rid = manifest["release_id"]
    for name, what in (("report", "release report"), ("explorer", "aggregate explorer")):
        create_link_artifact(
            key=f"{name}-{key}"[:100],
            link=(folder / f"{name}.html").as_uri(),
            link_text=f"{name}.html of release {rid}",
            description=f"The {what} of release {rid} (self-contained HTML; opens from disk)",
        )
    create_table_artifact(
        key=f"privacy-spend-{key}"[:100],
        table=manifest["privacy"]["stages"],
        description=f"Privacy spend of release {rid}",
    )
    rows = by_length_rows(manifest, folder, aggregates)
    create_table_artifact(
        key=f"by-length-{key}"[:100],
        table=rows,
        description=f"Noise, threshold and the agreement of the synthetic records with the DP "
        f"aggregates by combination length, release {rid} (from the published files)",
    )
    noise_rows = noise_table(manifest["privacy"].get("noise") or {})
    if noise_rows:
        create_table_artifact(
            key=f"noise-{key}"[:100],
            table=noise_rows,
            description=f"Noise of release {rid}. {manifest['privacy']['noise']['how_to_read']}",
        )
    create_markdown_artifact(
        key=f"release-{key}"[:100],
        markdown=summary_markdown(manifest, folder, rows, signed_by),
        description="DP release summary",
    )


def noise_table(noise: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``noise-<dataset>`` table: the record count's noise, then each length's.

    >>> noise_table({"record_count": {"mechanism": "discrete-laplace", "scale": 50.0,
    ...     "noise_sd": 70.7}, "by_length": []})[0]["counts"]
    'record count'
    """
    rows = [
        {
            "counts": f"length {n['length']}",
            "mechanism": n["mechanism"],
            "sigma or scale": n["sigma"],
            "allowed_sensitivity": n["allowed_sensitivity"],
            "threshold": n["threshold"],
            "noise_sd": n.get("noise_sd"),
        }
        for n in noise.get("by_length") or []
    ]
    rc = noise.get("record_count")
    if rc:
        rows.insert(
            0,
            {
                "counts": "record count",
                "mechanism": rc["mechanism"],
                "sigma or scale": rc["scale"],
                "allowed_sensitivity": 1,
                "threshold": None,
                "noise_sd": rc.get("noise_sd"),
            },
        )
    return rows


def _metrics(folder: Path) -> dict[str, Any]:
    """The published evaluation's metrics (evaluation.json), or {} when absent."""
    path = folder / "evaluation.json"
    if not path.is_file():
        return {}
    metrics = json.loads(path.read_text()).get("metrics")
    return metrics if isinstance(metrics, dict) else {}


AGREEMENT_COLUMNS = (
    "synthetic_combinations",
    "synthetic_not_reported",
    "mean_abs_error",
    "within_noise_95_pct",
    "tvd_mean",
)
"""The ``by-length`` table's columns from evaluation.json (the synthetic records vs the DP
aggregates; see :func:`sds_core.evaluation.agreement.agreement_summary`)."""


def by_length_rows(
    manifest: dict[str, Any], folder: Path, aggregates: AggregateSet
) -> list[dict[str, Any]]:
    """One row per length: combinations reported, noise, threshold, and the agreement of the
    synthetic records with the DP aggregates (published evaluation.json)."""
    noise = manifest["privacy"].get("noise") or {}
    entries = {int(e["length"]): e for e in noise.get("by_length") or []}
    agreement = _metrics(folder).get("by_length") or {}
    rows = []
    for k in range(1, aggregates.reporting_length + 1):
        e = entries.get(k)
        row: dict[str, Any] = {
            "length": k,
            "combinations_reported": len(aggregates.counts_of(k)),
            "noise_sd": None if e is None else round(count_sd(e), 3),
            "threshold": None
            if e is None or e.get("threshold") is None
            else round(float(e["threshold"]), 3),
        }
        a = agreement.get(str(k)) or {}
        row.update({c: a.get(c) for c in AGREEMENT_COLUMNS})
        rows.append(row)
    return rows


def summary_markdown(
    manifest: dict[str, Any],
    folder: Path,
    rows: list[dict[str, Any]],
    signed_by: str,
) -> str:
    """The headline numbers: guarantee, counts, links, signature, files and the public stage
    times (the dataset's budget is the ``budget-<dataset>`` artifact, linked)."""
    p = manifest["privacy"]
    budget_key = budget_artifact_key("budget", manifest["dataset"])
    lines = [
        f"# DP release {manifest['release_id']}",
        "",
        f"**(ε = {p['epsilon']:.6g}, δ = {p['delta']:.3g})-differentially private** release of "
        f"dataset `{manifest['dataset']}`.",
        "",
        "| headline | value |",
        "|---|---|",
        f"| protected (DP) record count | {manifest['input']['rows']:,} |",
        "| DP combinations reported | "
        + ", ".join(f"{r['combinations_reported']:,} of length {r['length']}" for r in rows)
        + " |",
    ]
    for r in rows:
        if r["tvd_mean"] is not None:
            lines.append(
                f"| mean {r['length']}-way TVD, synthetic records vs DP aggregates | "
                f"{r['tvd_mean']:.4g} |"
            )
    lines += [
        "",
        f"[report.html]({(folder / 'report.html').as_uri()}) · "
        f"[explorer.html]({(folder / 'explorer.html').as_uri()}) · directory `{folder}` · "
        f"budget of the dataset: [{budget_key}](/artifacts/key/{budget_key})",
        "",
        f"Signed (Ed25519, `manifest.sig`) by key `{signed_by}`",
        "",
        "| artifact | sha256 |",
        "|---|---|",
        *(f"| {n} | `{h[:16]}…` |" for n, h in sorted(manifest["artifacts"].items())),
        "",
        "| stage | seconds |",
        "|---|---|",
        *(
            f"| {s['name']} | {s.get('duration_s', 'not public')} |"
            for s in manifest.get("stages") or []
        ),
    ]
    return "\n".join(lines) + "\n"
