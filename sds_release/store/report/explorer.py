"""``explorer.html``: the DP aggregates and the synthetic counts in one interactive, offline page.

Embeds, for every combination the DP aggregates report or the synthetic records hold, its DP
count (or "not reported") and its synthetic count, as gzip-compressed typed arrays in base64,
plus the published noise scales; ``templates/explorer.js`` reads them in the browser. Only
published values go in: attribute labels are those of the published 1-way combinations.
"""

from __future__ import annotations

import base64
import io
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np

from sds_core.errors import SdsInputError
from sds_core.evaluation.agreement import LengthAgreement
from sds_release.store.report.charts import esc
from sds_release.store.report.inputs import ReportInputs, count_sd, laplace_half_width
from sds_release.store.report.offline import json_for_script, page_scripts
from sds_release.store.report.page import CSP, not_private_banner, template
from sds_release.store.workspace.encoding import half_width_95

TOP_ROWS = 50
"""Rows of the "largest combinations" table."""
_INT32_MAX = 2**31 - 1


def payload(inputs: ReportInputs) -> tuple[dict[str, Any], bytes]:
    """The explorer's metadata (JSON) and its binary block (uncompressed).

    Attributes get compact ids 0..A-1 in global order (so each length's rows stay sorted);
    per length: DP counts (int32, -1 = not reported), synthetic counts (int32), then one array
    of attribute ids per position (uint16, or uint32 beyond 65,535 attributes), 4-byte aligned.
    """
    meta, blocks = _layout(inputs)
    return meta, b"".join(blocks)


def _layout(inputs: ReportInputs) -> tuple[dict[str, Any], Iterator[bytes]]:
    """The metadata of :func:`payload` and its binary block as pieces (one array each, padded),
    made one at a time as they are read: the offsets follow from the sizes alone."""
    a = inputs.agreement
    published = a.published_attributes()
    compact = np.full(max(a.domain.n_attributes, 1), -1, dtype=np.int64)
    compact[published] = np.arange(published.shape[0])
    attr_col = a.domain.attribute_columns()
    offsets = a.domain.offsets
    attr_dtype = np.dtype("<u2") if published.shape[0] <= 0xFFFF else np.dtype("<u4")
    sd = inputs.sd_by_len()
    thresholds = {int(e["length"]): e.get("threshold") for e in inputs.noise.get("by_length") or []}
    size = 0

    def put(n: int, itemsize: int) -> int:
        nonlocal size
        start = size
        size += n * itemsize + (-(n * itemsize)) % 4
        return start

    unpublished = compact < 0
    lengths = []
    for k, la in sorted(a.by_len.items()):
        top, unknown = -1, False  # a slice of the union at a time
        for part in la.blocks():
            top = max(top, int(part.dp.max()), int(part.synthetic.max()))
            unknown = unknown or bool(unpublished[part.attrs].any())
        if top > _INT32_MAX:
            raise SdsInputError(
                f"a count of length {k} exceeds 2^31-1; the explorer stores counts as int32"
            )
        if unknown:
            # a combination over a value with no published count: a bug
            raise SdsInputError(f"length-{k} combination over a value with no 1-way count")
        lengths.append(
            {
                "k": k,
                "n": len(la),
                "hw": None if k not in sd else float(half_width_95(sd[k])),
                "threshold": thresholds.get(k),
                "dp_offset": put(len(la), 4),
                "syn_offset": put(len(la), 4),
                "attr_offsets": [put(len(la), attr_dtype.itemsize) for _ in range(k)],
            }
        )

    def column(la: LengthAgreement, which: int) -> Iterator[bytes]:
        """Column ``which`` of a length (0 DP, 1 synthetic, 2.. attribute ids) a slice at a
        time, then its padding to 4 bytes: the union is never held whole."""
        size = 0
        for part in la.blocks():
            if which == 0:
                arr = part.dp.astype("<i4")
            elif which == 1:
                arr = part.synthetic.astype("<i4")
            else:
                arr = compact[part.attrs[:, which - 2]].astype(attr_dtype)
            data = arr.tobytes()
            size += len(data)
            yield data
        yield b"\0" * ((-size) % 4)

    def blocks() -> Iterator[bytes]:
        for _, la in sorted(a.by_len.items()):
            for which in range(2 + la.length):
                yield from column(la, which)

    m = inputs.manifest
    rc = inputs.noise.get("record_count")
    meta = {
        "release_id": m["release_id"],
        "dataset": m["dataset"],
        "epsilon": m["privacy"]["epsilon"],
        "delta": m["privacy"]["delta"],
        "reporting_length": a.reporting_length,
        "record_count": int(m["input"]["rows"]),
        "record_count_hw": laplace_half_width(float(rc["scale"])) if isinstance(rc, dict) else None,
        "synthetic_records": inputs.synthetic_records,
        "columns": list(a.domain.columns),
        "attr_column": attr_col[published].tolist(),
        "attr_label": [
            a.domain.labels[int(attr_col[g])][int(g) - offsets[int(attr_col[g])]]
            for g in published.tolist()
        ],
        "attr_bytes": attr_dtype.itemsize,
        "lengths": lengths,
        "top_rows": TOP_ROWS,
    }
    return meta, blocks()


def explorer_html(inputs: ReportInputs) -> bytes:
    """The explorer page as UTF-8 HTML (deterministic: gzip without a timestamp)."""
    out = io.BytesIO()
    write_explorer(out, inputs)
    return out.getvalue()


def write_explorer(file: BinaryIO, inputs: ReportInputs) -> None:
    """Write the explorer page to ``file``, its binary block gzipped and base64-encoded piece
    by piece (the same bytes as ``gzip.compress(data, 3, mtime=0)`` of the whole block; the
    page is never held whole: at millions of combinations it is hundreds of MB)."""
    meta, blocks = _layout(inputs)
    head, tail = _page(inputs, meta)
    file.write(head.encode())
    gz = zlib.compressobj(3, zlib.DEFLATED, 31)  # gzip framing, mtime 0: gzip.compress's bytes
    pending = b""
    for block in blocks:
        pending += gz.compress(block)
        cut = len(pending) - len(pending) % 3  # base64 of whole 3-byte groups, no padding
        file.write(base64.b64encode(pending[:cut]))
        pending = pending[cut:]
    file.write(base64.b64encode(pending + gz.flush()))
    file.write(tail.encode())


def _page(inputs: ReportInputs, meta: dict[str, Any]) -> tuple[str, str]:
    """The explorer page before and after its base64 data block."""
    m = inputs.manifest
    sd = {e["length"]: count_sd(e) for e in inputs.noise.get("by_length") or []}
    noise_note = (
        "The error bar is the 95% interval of the DP noise (±1.96 standard deviations: "
        + ", ".join(f"length {k}: ±{half_width_95(v):.1f}" for k, v in sorted(sd.items()))
        + "); rounding and the consistency post-processing are not included."
        if sd
        else "This synthesizer publishes the counts of its synthetic records as its aggregates, "
        "so they carry no separate noise."
    )
    head = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Aggregate explorer: {esc(m['release_id'])}</title>"
        f"<style>{template('explorer.css')}</style></head><body>"
        + not_private_banner(m)  # a seeded release says so first
        + f"<h1>Aggregate explorer</h1><p class='meta'>Release {esc(m['release_id'])} of dataset "
        f"{esc(m['dataset'])} · (ε = {m['privacy']['epsilon']:.4g}, "
        f"δ = {m['privacy']['delta']:.3g})-differentially private · "
        "<a href='report.html'>release report</a></p>"
        "<p class='note'>Choose values for up to "
        f"{meta['reporting_length']} columns. The page shows the DP aggregate count of that "
        'combination ("suppressed" when the release does not report it), the number of '
        f"synthetic records holding it, and the noise's error bar. {esc(noise_note)} Everything "
        "here comes from aggregates.parquet and synthetic.parquet.</p>"
        "<p id='status'>Loading…</p><div id='selectors'></div>"
        "<button id='clear' type='button'>Clear the selection</button>"
        "<div class='result'><div><div>Selected combination</div><div id='combination'></div>"
        "</div><div class='dp'><div>DP aggregate count</div><div class='big' id='dp-count'>"
        "</div><div id='dp-interval'></div></div><div class='syn'><div>Synthetic records</div>"
        "<div class='big' id='syn-count'></div></div></div><div id='bar'></div>"
        "<h2>Largest combinations extending the selection</h2><p id='top-caption'></p>"
        "<table><thead><tr><th>combination</th><th class='num'>DP count</th>"
        "<th class='num'>95% noise</th><th class='num'>synthetic</th>"
        "<th class='num'>synthetic − DP</th></tr></thead><tbody id='top-rows'></tbody></table>"
        f"<script type='application/json' id='meta'>{json_for_script(meta)}</script>"
        "<script type='application/octet-stream' id='data'>"
    )
    return head, f"</script>{page_scripts('explorer.js', 'sds_release.store.report')}</body></html>"
