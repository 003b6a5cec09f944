"""Publishing a release: the DP artifacts, the report and the manifest (no Prefect here).

The last stage of the flow (``tasks/publish.py`` wraps it and adds the Prefect artifacts).
Everything written here is DP output or public parameters: the DP aggregates, the synthetic
records, the evaluation (marked as computed from the sensitive data), a redacted validation
summary, and ``manifest.json`` with the sha256 of every artifact. The manifest turns
``complete`` only after every artifact is on disk.
"""

from __future__ import annotations

import html
import json
import time
from typing import Any

from release_store.artifact_encoding import (
    aggregates_parquet,
    aggregates_tsv,
    synthetic_files,
)
from release_store.run import ReleaseRun, noise_scales
from release_store.stages import PUBLISH, stage_record
from release_store.workdir import now
from release_store.workspace import (
    atomic_write_bytes,
    atomic_write_json,
    collect_versions,
    sha256_file,
    utc_now,
)

ARTIFACTS = (
    "aggregates.parquet",
    "aggregates.tsv",
    "synthetic.parquet",
    "synthetic.csv",
    "evaluation.json",
    "validation.json",
    "report.html",
)


def public_evaluation(evaluation: Any) -> dict[str, Any]:
    """The publishable evaluation: :func:`sds_core.evaluation.metrics.publishable_evaluation`.

    Rounded ratios only (TVD, empty shares, suppressed/fabricated %, preservation, proportional
    error, synthetic risk); nothing that reveals the true record count or an exact count. The
    full evaluation stays in the private workspace (checkpoint).
    """
    from sds_core.evaluation.metrics import publishable_evaluation

    if not isinstance(evaluation, dict) or "marginal_fidelity" not in evaluation:
        return {"differentially_private": False, "status": "no evaluation in this release"}
    return publishable_evaluation(evaluation)


def write_artifacts(
    run: ReleaseRun,
    aggregates: Any,
    synthetic: Any,
    evaluation: dict[str, Any],
    validation: dict[str, Any],
) -> dict[str, str]:
    """Write the publishable files; returns name -> sha256."""
    out = run.dirs.release_dir
    table = aggregates.to_arrow()
    atomic_write_bytes(out / "aggregates.parquet", aggregates_parquet(table))
    atomic_write_bytes(out / "aggregates.tsv", aggregates_tsv(aggregates, table))
    del table
    syn_parquet, syn_csv = synthetic_files(synthetic)
    atomic_write_bytes(out / "synthetic.parquet", syn_parquet)
    atomic_write_bytes(out / "synthetic.csv", syn_csv)
    del syn_parquet, syn_csv
    atomic_write_json(
        out / "evaluation.json",
        {
            "note": "utility metrics computed from the sensitive data and the DP release; NOT "
            "differentially private; only rounded ratios that reveal neither the true "
            "record count nor exact counts are published",
            "computed_from_sensitive_data": True,
            "differentially_private": False,
            "metrics": public_evaluation(evaluation),
        },
    )
    atomic_write_json(out / "validation.json", validation)
    return {name: sha256_file(out / name) for name in ARTIFACTS if (out / name).is_file()}


def _num(value: Any, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def noise_html(manifest: dict[str, Any]) -> str:
    """Report section: the noise of each published count (error bars) and how to read it.

    Stage times stay in the manifest and the Prefect summary: the report holds no durations,
    so a resumed release's report equals an uninterrupted one's (timestamps aside).
    """
    noise = manifest["privacy"].get("noise") or {}
    rows = []
    if noise.get("record_count"):
        rc = noise["record_count"]
        rows.append(
            f"<tr><td>record count</td><td>{html.escape(rc['mechanism'])}</td>"
            f"<td>scale {rc['scale']:.6g}</td><td></td><td></td><td>{rc['noise_sd']:.4g}</td></tr>"
        )
    for n in noise.get("by_length", []):
        rows.append(
            f"<tr><td>length {n['length']}</td><td>{html.escape(n['mechanism'])}</td>"
            f"<td>σ {n['sigma']:.6g}</td><td>{n['allowed_sensitivity']}</td>"
            f"<td>{_num(n['threshold'], '.6g') or 'none released'}</td>"
            f"<td>{_num(n.get('noise_sd'), '.4g')}</td></tr>"
        )
    return (
        "<h2>Noise: how far a published count may be from the true one</h2>"
        "<table><tr><th>counts</th><th>mechanism</th><th>noise scale</th>"
        "<th>allowed sensitivity Δ</th><th>threshold</th><th>noise standard deviation</th></tr>"
        f"{''.join(rows)}</table><p>{html.escape(noise.get('how_to_read', ''))}</p>"
    )


def report_html(manifest: dict[str, Any], evaluation: dict[str, Any]) -> bytes:
    """A self-contained human-readable report of the release and its privacy spend."""
    p = manifest["privacy"]
    rows = "".join(
        f"<tr><td>{html.escape(s['stage'])}</td><td>{html.escape(s['mechanism'])}</td>"
        f"<td>{s['epsilon']:.6g}</td><td>{s['delta']:.3g}</td>"
        f"<td>{'' if s['rho'] is None else format(s['rho'], '.6g')}</td></tr>"
        for s in p["stages"]
    )
    params = html.escape(json.dumps(manifest["parameters"], indent=2))
    metrics = html.escape(json.dumps(public_evaluation(evaluation), indent=2, default=str)[:20000])
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>DP release {html.escape(manifest["release_id"])}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
td,th{{border:1px solid #ccc;padding:.2em .5em}}table{{border-collapse:collapse}}</style></head>
<body><h1>DP release {html.escape(manifest["release_id"])}</h1>
<p>Dataset <b>{html.escape(manifest["dataset"])}</b>, created {manifest["created_at"]}.
This release is (ε={p["epsilon"]:.6g}, δ={p["delta"]:.3g})-differentially private: the
aggregates and synthetic records reveal at most that much about any one record.</p>
<p>Protected (noisy) number of records: {manifest["input"]["rows"]}.</p>
<h2>Privacy spend by stage</h2><table><tr><th>stage</th><th>mechanism</th><th>ε</th>
<th>δ</th><th>rho (zCDP)</th></tr>{rows}</table>
{noise_html(manifest)}
<h2>Parameters</h2><pre>{params}</pre>
<h2>Utility (computed from the sensitive data)</h2><pre>{metrics}</pre>
</body></html>""".encode()


def write_release(
    run: ReleaseRun,
    *,
    parameters: dict[str, Any],
    input_sha256: str,
    aggregates: Any,
    synthetic: Any,
    evaluation: dict[str, Any],
    validation: dict[str, Any],
    stages: list[dict[str, Any]],
    noise: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write artifacts, the report and the complete manifest; close the ledger reservation.

    ``noise`` is the release's noise description (``privacy.noise``, see
    :func:`release_store.run.noise_scales`). Returns the complete manifest, whose last stage
    entry is this ``publish`` stage with its own timing.
    """
    started, t0 = utc_now(), time.perf_counter()
    dirs = run.dirs
    ledger = run.ledger()
    charges = ledger.charges(release_id=run.release_id)
    hashes = write_artifacts(run, aggregates, synthetic, evaluation, validation)
    old = dirs.manifest() or {}
    manifest = {
        "release_id": run.release_id,
        "dataset": run.dataset,
        "created_at": old.get("created_at", now()),
        "finished_at": now(),
        "status": "running",
        "parameters": parameters,
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
            "noise": noise if noise is not None else noise_scales(run.params, {}),
        },
        "input": {
            "sha256": input_sha256,
            "rows": int(aggregates.protected_number_of_records),
            "rows_note": "DP (noisy) record count; the true count is never published",
        },
        "stages": stages,
        "artifacts": hashes,
        "versions": collect_versions(),
    }
    atomic_write_bytes(dirs.release_dir / "report.html", report_html(manifest, evaluation))
    manifest["artifacts"]["report.html"] = sha256_file(dirs.release_dir / "report.html")
    manifest["stages"] = [
        *stages,
        stage_record(PUBLISH, started, t0, artifacts=sorted(manifest["artifacts"])),
    ]
    ledger.complete(run.release_id)
    manifest["status"] = "complete"
    dirs.write_manifest(manifest)
    return manifest
