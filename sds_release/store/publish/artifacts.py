"""Publishing a release: the DP artifacts, the report and the manifest (no Prefect here).

The last stage of the flow (``sds_release/tasks/publish.py`` wraps it and adds the Prefect
artifacts). Everything written to the release directory is DP output, public parameters or
post-processing of them: the DP aggregates, the synthetic records, their agreement
(``evaluation.json``), the validation summary, the report and explorer, and ``manifest.json`` with
the sha256 of every artifact and a keyed commitment to the input. The evaluation against the
sensitive data goes to the private workspace only (the custodian report). The manifest turns
``complete`` only after every artifact is on disk.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from sds_core.data.table import PreparedTable
from sds_core.marginals.plan import SdsPlan
from sds_release.store.config.sources import source_name
from sds_release.store.inputs.commitment import input_fingerprint
from sds_release.store.publish.synthetic import write_synthetic
from sds_release.store.report.inputs import recorded_noise
from sds_release.store.run.claims import privacy_claims
from sds_release.store.run.faults import fault_point
from sds_release.store.run.memory import return_free_memory
from sds_release.store.run.release_run import ReleaseRun
from sds_release.store.run.stages import PUBLISH, public_stages, stage_record
from sds_release.store.run.workdir import now
from sds_release.store.workspace.encoding import (
    AGGREGATE_ROWS,
    SYNTHETIC_PARQUET,
    part_rows,
    synthetic_part_name,
    write_aggregates_parquet,
    write_aggregates_tsv,
)
from sds_release.store.workspace.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_stream,
    sha256_file,
)
from sds_release.store.workspace.home import utc_now
from sds_release.store.workspace.manifest import collect_versions

ARTIFACTS = (
    "aggregates.parquet",
    "aggregates.tsv",
    "synthetic.parquet",
    "synthetic.csv",
    "validation.json",
)
"""The data artifacts :func:`write_artifacts` writes; ``evaluation.json``, ``report.html`` and
``explorer.html`` follow from them (:func:`write_report_and_explorer`)."""

EVALUATION_NOTE = (
    "How the synthetic records agree with the DP aggregates, computed only from the published "
    "files (aggregates.parquet, synthetic.parquet and manifest.json privacy.noise): "
    "post-processing of the differentially private release, covered by its guarantee. The "
    "evaluation against the sensitive data (SDS's preservation, suppressed and fabricated "
    "shares, TVD against the input) is not differentially private and is never published: it "
    "stays with the custodian (private/<release-id>/custodian-report.html)."
)


def public_evaluation(metrics: dict[str, Any]) -> dict[str, Any]:
    """``evaluation.json``: the agreement summary (``metrics``) with what it is computed from.

    >>> public_evaluation({"by_length": {}})["computed_from_sensitive_data"]
    False
    """
    return {
        "note": EVALUATION_NOTE,
        "computed_from": [
            "aggregates.parquet",
            "synthetic.parquet",
            "manifest.json privacy.noise",
        ],
        "computed_from_sensitive_data": False,
        "differentially_private": True,
        "metrics": metrics,
    }


def write_artifacts(
    run: ReleaseRun,
    aggregates: Any,
    synthetic: Any,
    chunks: Iterator[PreparedTable],
    validation: dict[str, Any],
    noise: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Write the publishable files; returns name -> sha256.

    ``noise`` (the manifest's ``privacy.noise``) gives ``aggregates.parquet`` its error bars;
    ``chunks`` are the ``synthetic`` records in this process a chunk at a time (the
    executor's :meth:`~sds_release.store.executor.base.Executor.chunks`).

    The synthetic files and the aggregates' TSV are encoded in a second thread while this one
    builds the aggregate table and its Parquet (Arrow's kernels and Parquet writer release the
    GIL): the same bytes, in about two thirds of the time on two free cores. Beyond one Parquet
    row group of combinations (:data:`AGGREGATE_ROWS`) the second thread starts after the
    Parquet: both would hold a row group's text at once (raw 2M on Dask: the driver's publish
    peak 1,060 -> 916 MiB for ~3 s more), and memory, not a second, bounds such releases. The
    synthetic records, wherever the executor holds them, are streamed into their files one
    chunk at a time (:func:`~sds_release.store.publish.synthetic.write_synthetic`), and the
    aggregates' Parquet and TSV a row group (2^20 combinations) at a time, so this process
    never holds their whole text, whatever the number of records or combinations.
    """
    out = run.dirs.release_dir
    part_records = run.params.synthetic_part_records
    noise_sd = {int(e["length"]): float(e["noise_sd"]) for e in (noise or {}).get("by_length", [])}
    together = aggregates.total_combinations() <= AGGREGATE_ROWS
    with ThreadPoolExecutor(1, thread_name_prefix="sds-publish") as pool:

        def second_thread() -> tuple[Future[list[str]], Future[Path]]:
            # streamed a chunk at a time, from the workers or from the table here
            streamed = pool.submit(write_synthetic, out, synthetic, chunks, part_records)
            tsv = pool.submit(
                atomic_write_stream,
                out / "aggregates.tsv",
                partial(write_aggregates_tsv, aggregates=aggregates),
            )
            return streamed, tsv

        started = second_thread() if together else None
        atomic_write_stream(
            out / "aggregates.parquet",
            partial(write_aggregates_parquet, aggregates=aggregates, noise_sd_by_len=noise_sd),
        )
        streamed, tsv = started or second_thread()
        parts = streamed.result()
        tsv.result()
    atomic_write_json(out / "validation.json", validation)
    names = [n for n in ARTIFACTS if (out / n).is_file()] + parts
    return {name: sha256_file(out / name) for name in names}


def synthetic_layout(n_records: int, part_records: int) -> dict[str, Any]:
    """The manifest's ``synthetic_parts`` entry of a split ``synthetic.parquet`` ({}: one file)."""
    rows = part_rows(n_records, part_records)
    if len(rows) == 1:
        return {}
    return {
        "synthetic_parts": {
            "directory": SYNTHETIC_PARQUET,
            "rows": n_records,
            "parts": [{"file": synthetic_part_name(i), "rows": r} for i, r in enumerate(rows)],
            "how_to_read": "a Parquet dataset: pyarrow.dataset.dataset('synthetic.parquet') or "
            "pandas.read_parquet('synthetic.parquet') reads the parts in name order; each part's "
            "sha256 is in 'artifacts'",
        }
    }


def write_report_and_explorer(
    run: ReleaseRun,
    manifest: dict[str, Any],
    aggregates: Any,
    synthetic: Any,
) -> None:
    """Write ``evaluation.json``, ``report.html`` and ``explorer.html``; record their sha256 in
    ``manifest``.

    All three are built from published values only (:mod:`sds_release.store.report.inputs`); the
    manifest gets ``privacy.noise`` when it has none yet.
    """
    from sds_release.store.report.explorer import write_explorer
    from sds_release.store.report.inputs import gather
    from sds_release.store.report.page import report_html

    inputs = gather(run, manifest, aggregates, synthetic)
    out = run.dirs.release_dir
    atomic_write_json(out / "evaluation.json", public_evaluation(inputs.evaluation))
    manifest["artifacts"]["evaluation.json"] = sha256_file(out / "evaluation.json")
    atomic_write_bytes(out / "report.html", report_html(inputs))
    # the explorer embeds every combination: streamed, never held whole
    atomic_write_stream(out / "explorer.html", partial(write_explorer, inputs=inputs))
    for name in ("report.html", "explorer.html"):
        manifest["artifacts"][name] = sha256_file(out / name)


def write_custodian_report(
    run: ReleaseRun,
    manifest: dict[str, Any],
    evaluation: Any,
    stages: list[dict[str, Any]] | None = None,
) -> None:
    """The evaluation against the sensitive data, for the custodian only: ``private/<id>/``
    ``custodian-evaluation.json`` (the full evaluation) and ``custodian-report.html``, 0600.

    The page also shows what the public files leave out: the "0" cells warning the prepare
    stage found (recorded in the private state), the dataset's budget before and after the
    release, and ``stages``, the run's stage records with every time.
    """
    from sds_release.store.inputs.preflight import zero_warning
    from sds_release.store.report.custodian import (
        CUSTODIAN_EVALUATION,
        CUSTODIAN_REPORT,
        custodian_report_html,
        evaluation_json,
    )
    from sds_release.store.report.inputs import budget_snapshot

    dirs = run.dirs
    ev = evaluation_json(evaluation) if isinstance(evaluation, dict) else {}
    atomic_write_json(dirs.private_dir / CUSTODIAN_EVALUATION, ev, private=True)
    public = Path(os.path.relpath(dirs.release_dir / "report.html", dirs.private_dir))
    zeros = dirs.state().get("zero_shares") or {}
    atomic_write_bytes(
        dirs.private_dir / CUSTODIAN_REPORT,
        custodian_report_html(
            manifest,
            ev,
            public.as_posix(),
            budget=budget_snapshot(run),
            stages=stages or [],
            warnings=[zero_warning(zeros)] if zeros else [],
        ),
        private=True,
    )


def write_release(
    run: ReleaseRun,
    *,
    parameters: dict[str, Any],
    input_sha256: str,
    aggregates: Any,
    synthetic: Any,
    synthetic_chunks: Iterator[PreparedTable],
    evaluation: dict[str, Any],
    validation: dict[str, Any],
    stages: list[dict[str, Any]],
    noise: dict[str, Any] | None = None,
    plan: SdsPlan | None = None,
) -> dict[str, Any]:
    """Write artifacts, the report and the complete manifest; close the ledger reservation.

    ``plan`` (the SDS plan's choices and reason, DP or public values) becomes the manifest's
    ``plan``. ``synthetic_chunks``: the ``synthetic`` records in this process a chunk at a time.

    ``noise`` is the release's noise description (``privacy.noise``, see
    :func:`sds_release.store.run.release_run.noise_scales`). ``evaluation`` (computed from the
    sensitive data) goes only to the private custodian report. ``stages`` (the run's full
    stage records) are published only as :func:`~sds_release.store.run.stages.public_stages`
    (names and statuses; durations of the stages whose time is public); every time is kept
    privately (``private/<release-id>/timeline.json``) and shown in the custodian report.
    Returns the complete manifest, whose last stage entry is this ``publish`` stage.
    """
    started, t0 = utc_now(), time.perf_counter()
    dirs = run.dirs
    ledger = run.ledger()
    charges = ledger.charges(release_id=run.release_id)
    noise = noise if noise is not None else recorded_noise(run)
    fault_point("publish", dirs.private_dir)  # test-only (SDS_TEST_PAUSE_AT=publish)
    hashes = write_artifacts(run, aggregates, synthetic, synthetic_chunks, validation, noise)
    return_free_memory()  # the encoders' freed pages, before the report counts the records
    old = dirs.manifest() or {}
    manifest = {
        "release_id": run.release_id,
        "dataset": run.dataset,
        "created_at": old.get("created_at", now()),  # the reservation's: before any data
        "status": "running",
        "parameters": parameters,
        **({"plan": plan.as_dict()} if plan is not None else {}),
        "privacy": {
            "epsilon": run.epsilon,
            "delta": run.delta,
            "composition": "zCDP for the marginals + Laplace record count (basic composition)",
            "stages": [
                {
                    "stage": c.stage,
                    "mechanism": c.mechanism,
                    "epsilon": c.epsilon,
                    "delta": c.delta,
                    "rho": c.rho,
                }
                for c in charges
            ],
            "noise": noise,
            **privacy_claims(run.params, aggregates.domain.n_columns),  # seeded? effective δ
        },
        "input": {
            # a file by its name (never the local path); a database by its URL and table
            "name": source_name(run.params.input, table=run.params.table, query=run.params.query),
            # a keyed commitment, never the plain hash (a replay of an older release: as it was)
            **input_fingerprint(
                run.dirs.commitment_key(run.params.seed, create=run.replay is None), input_sha256
            ),
            "rows": int(aggregates.protected_number_of_records),
            "rows_note": "DP (noisy) record count; the true count is never published",
        },
        "stages": public_stages(stages),
        "artifacts": hashes,
        **synthetic_layout(synthetic.n_records, run.params.synthetic_part_records),
        "versions": collect_versions(),
    }
    write_report_and_explorer(run, manifest, aggregates, synthetic)
    write_custodian_report(run, manifest, evaluation, stages)
    timeline = [
        *stages,
        stage_record(PUBLISH, started, t0, artifacts=sorted(manifest["artifacts"])),
    ]
    dirs.write_timeline(timeline, created_at=manifest["created_at"], finished_at=now())
    manifest["stages"] = public_stages(timeline)
    ledger.complete(run.release_id)
    manifest["status"] = "complete"
    dirs.write_manifest(manifest)
    return manifest
