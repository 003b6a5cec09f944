"""Tiny test-local encoder (rows of strings -> PreparedTable) for the aggregation tests.

Follows the SDS rules that matter here: values are trimmed, "" and "0" are empty. The real
preprocessing lives in sds_core.data.preparation; this keeps the aggregation tests independent of
it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable


def table_from_rows(header: Sequence[str], rows: Sequence[Sequence[str]]) -> PreparedTable:
    """PreparedTable from string rows ("" and "0" are empty)."""
    cols = []
    labels = []
    for j in range(len(header)):
        vals = [str(r[j]).strip() for r in rows]
        labs = tuple(sorted({v for v in vals if v not in ("", "0")}))
        index = {v: i for i, v in enumerate(labs)}
        cols.append([index.get(v, -1) for v in vals])
        labels.append(labs)
    codes = np.array(cols, dtype=np.int32).T.reshape(len(rows), len(header))
    return PreparedTable(Domain(tuple(header), tuple(labels)), np.ascontiguousarray(codes))


def table_from_frame(frame: pd.DataFrame) -> PreparedTable:
    """PreparedTable from a string DataFrame (vectorized; "" / "0" / NaN are empty)."""
    labels = []
    codes = np.empty((len(frame), frame.shape[1]), dtype=np.int32)
    for j, name in enumerate(frame.columns):
        vals = frame[name].fillna("").astype(str).str.strip()
        empty = vals.isin(["", "0"]).to_numpy()
        cat = pd.Categorical(vals.where(~empty, None))
        labs = tuple(str(x) for x in cat.categories)
        order = np.argsort(np.array(labs, dtype=object), kind="stable")
        remap = np.empty(len(labs), dtype=np.int32)
        remap[order] = np.arange(len(labs), dtype=np.int32)
        raw = cat.codes.astype(np.int32)
        codes[:, j] = np.where(raw >= 0, remap[np.maximum(raw, 0)], -1)
        labels.append(tuple(sorted(labs)))
    return PreparedTable(Domain(tuple(frame.columns), tuple(labels)), codes)


def table_from_csv(path: Path) -> PreparedTable:
    """PreparedTable from a CSV read as strings."""
    return table_from_frame(pd.read_csv(path, dtype=str, keep_default_na=False))
