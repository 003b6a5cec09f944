"""explorer.html written piece by piece is the page of the whole block compressed at once."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import io
import re

import numpy as np

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.evaluation.agreement import agreement, agreement_summary
from sds_core.marginals.exact_counts import exact_aggregates
from sds_release.store.report.explorer import explorer_html, payload, write_explorer
from sds_release.store.report.inputs import ReportInputs


def large_inputs() -> ReportInputs:
    """An agreement of ~10^5 combinations of lengths 1..3 (the block spans many gzip pieces)."""
    cards = (40, 30, 25, 12)
    domain = Domain(
        tuple(f"c{j}" for j in range(len(cards))),
        tuple(tuple(f"v{j}-{i:03d}" for i in range(n)) for j, n in enumerate(cards)),
    )
    rng = np.random.default_rng(7)
    codes = np.stack([rng.integers(0, n, 60_000) for n in cards], axis=1).astype(np.int32)
    half = PreparedTable(domain, codes[:30_000])
    dp = dataclasses.replace(exact_aggregates(half, 3), is_dp=True)  # stands in for DP counts
    compared = agreement(dp, PreparedTable(domain, codes[30_000:]))
    manifest = {
        "release_id": "rel-big",
        "dataset": "big",
        "privacy": {"epsilon": 1.0, "delta": 1e-6},
        "input": {"rows": 30_000},
    }
    return ReportInputs(manifest, agreement_summary(compared, {}), compared, 30_000)


def test_streamed_explorer_is_the_one_shot_page() -> None:
    """The streamed data block is base64(gzip.compress(block, 3, mtime=0)) of the whole block,
    and the page around it is the same: gzip and base64 pieces joined give the same bytes."""
    inputs = large_inputs()
    assert sum(len(la) for la in inputs.agreement.by_len.values()) > 50_000
    meta, data = payload(inputs)
    out = io.BytesIO()
    write_explorer(out, inputs)
    page = out.getvalue()
    assert page == explorer_html(inputs)
    blob = re.search(rb"id='data'>(.*?)</script>", page, re.S)
    assert blob is not None
    assert blob.group(1) == base64.b64encode(gzip.compress(data, compresslevel=3, mtime=0))
    assert len(base64.b64decode(blob.group(1))) > 1 << 16  # many zlib output pieces
    assert gzip.decompress(base64.b64decode(blob.group(1))) == data
    assert meta["lengths"][-1]["attr_offsets"][-1] < len(data)
