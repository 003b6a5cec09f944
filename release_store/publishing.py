"""Publishing a release: the DP artifacts, the report and the manifest (no Prefect here).

The last stage of the flow (``tasks/publish.py`` wraps it and adds the Prefect artifacts).
Everything written here is DP output or public parameters: the DP aggregates, the synthetic
records, the evaluation (marked as computed from the sensitive data), a redacted validation
summary, and ``manifest.json`` with the sha256 of every artifact. The manifest turns
``complete`` only after every artifact is on disk.
"""

from __future__ import annotations

import io
import re
from pathlib import PurePath
from typing import Any

import pandas as pd

from release_store.run import ReleaseRun
from release_store.workdir import now
from release_store.workspace import (
    atomic_write_bytes,
    atomic_write_json,
    collect_versions,
    sha256_file,
)

ARTIFACTS = (
    "aggregates.parquet",
    "aggregates.tsv",
    "synthetic.parquet",
    "synthetic.csv",
    "evaluation.json",
    "validation.json",
    "report.html",
    "explorer.html",
)


def aggregates_tsv(aggregates: Any) -> bytes:
    """SDS text form: header, ``record_count`` line, then combinations by length, count desc."""
    frame = aggregates.to_frame()
    frame = frame.sort_values(
        ["length", "count", "combination"], ascending=[True, False, True], kind="stable"
    )
    lines = [
        "selections\tprotected_count",
        f"record_count\t{int(aggregates.protected_number_of_records)}",
    ]
    lines += [f"{c}\t{n}" for c, n in zip(frame["combination"], frame["count"], strict=True)]
    return ("\n".join(lines) + "\n").encode()


def _parquet_bytes(frame: Any) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buf)
    return buf.getvalue()


def csv_bytes(frame: Any) -> bytes:
    """The frame as CSV, byte-identical to ``frame.to_csv(index=False)`` (minimal quoting).

    Arrow writes it ~20x faster than pandas when no header or cell needs quoting (no delimiter,
    quote or line break in any label); otherwise pandas quotes what needs it.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    special = re.compile(r'[,"\r\n]')
    texts = [str(c) for c in frame.columns]
    for col in frame.columns:
        texts.extend(str(v) for v in pd.unique(frame[col].astype(str)))
    if frame.shape[1] == 0 or bool(frame.isna().any().any()) or any(map(special.search, texts)):
        return str(frame.to_csv(index=False)).encode()
    buf = io.BytesIO()
    buf.write((",".join(str(c) for c in frame.columns) + "\n").encode())
    table = pa.Table.from_pandas(frame.astype(str), preserve_index=False)
    pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return buf.getvalue()


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a CSV cell as a formula (CSV injection)."""
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def neutralize_formulas(frame: Any) -> tuple[Any, int]:
    """A copy of ``frame`` whose text cells (and headers) that a spreadsheet would run as a
    formula are prefixed with an apostrophe; plain numbers (``-5``, ``+1.5e3``) are kept.

    Returns the frame and how many cells were changed (0: the frame itself, unchanged).

    >>> import pandas as pd
    >>> out, n = neutralize_formulas(pd.DataFrame({"a": ["=1+1", "-5", "@x", "ok"]}))
    >>> list(out["a"]), n
    (["'=1+1", '-5', "'@x", 'ok'], 2)
    """

    def risky(v: object) -> bool:
        return isinstance(v, str) and v.startswith(FORMULA_START) and not _NUMBER.fullmatch(v)

    changed = sum(int(frame[c].map(risky).sum()) for c in frame.columns)
    renamed = {c: f"'{c}" for c in frame.columns if risky(str(c))}
    if not changed and not renamed:
        return frame, 0
    out = frame.rename(columns=renamed)
    for c in out.columns:
        out[c] = out[c].map(lambda v: f"'{v}" if risky(v) else v)
    return out, changed + len(renamed)


def public_evaluation(evaluation: Any) -> dict[str, Any]:
    """The publishable evaluation: :func:`sds_core.evaluation.publishable.publishable_evaluation`.

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
    from sds_core.data.decoding import to_frame

    out = run.dirs.release_dir
    atomic_write_bytes(out / "aggregates.parquet", _parquet_bytes(aggregates.to_frame()))
    atomic_write_bytes(out / "aggregates.tsv", aggregates_tsv(aggregates))
    syn = to_frame(synthetic, empty_value="", join_multi_value_columns=True)
    atomic_write_bytes(out / "synthetic.parquet", _parquet_bytes(syn))
    safe, _ = neutralize_formulas(syn)  # synthetic.parquet keeps the values unchanged
    atomic_write_bytes(out / "synthetic.csv", csv_bytes(safe))
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


def write_report_and_explorer(
    run: ReleaseRun,
    manifest: dict[str, Any],
    aggregates: Any,
    synthetic: Any,
    evaluation: dict[str, Any],
) -> None:
    """Write ``report.html`` and ``explorer.html`` and record their sha256 in ``manifest``.

    Both are built from published values only (:mod:`release_store.report_inputs`); the
    manifest gets ``privacy.noise`` when it has none yet.
    """
    from release_store.explorer import explorer_html
    from release_store.report import report_html
    from release_store.report_inputs import gather

    inputs = gather(run, manifest, aggregates, synthetic, public_evaluation(evaluation))
    for name, build in (("report.html", report_html), ("explorer.html", explorer_html)):
        path = run.dirs.release_dir / name
        atomic_write_bytes(path, build(inputs))
        manifest["artifacts"][name] = sha256_file(path)


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
    aggregate_noise: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write artifacts, the report and the complete manifest; close the ledger reservation.

    ``aggregate_noise`` (aggregate-seeded releases): each length's noise scale σ_k·√Δ_k and
    threshold ρ_k, DP or public values that make the aggregates measurements anyone can refit
    (the consistent model of ``synthesis = "model"`` is a function of them and the aggregates).

    Returns the complete manifest.
    """
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
            **({"aggregate_noise": aggregate_noise} if aggregate_noise is not None else {}),
        },
        "input": {
            "name": PurePath(run.params.input).name,  # never the local path
            "sha256": input_sha256,
            "rows": int(aggregates.protected_number_of_records),
            "rows_note": "DP (noisy) record count; the true count is never published",
        },
        "stages": stages,
        "artifacts": hashes,
        "versions": collect_versions(),
    }
    write_report_and_explorer(run, manifest, aggregates, synthetic, evaluation)
    manifest["stages"] = [
        *stages,
        {
            "name": "publish",
            "status": "complete",
            "finished": now(),
            "artifacts": sorted(manifest["artifacts"]),
        },
    ]
    ledger.complete(run.release_id)
    manifest["status"] = "complete"
    dirs.write_manifest(manifest)
    return manifest
