"""Declared, data-independent binning of numeric columns (a preprocessing step of prepare).

A :class:`Binning` maps numbers to labelled bins whose edges the caller declares up front
(explicit edges, or a width and an origin). Nothing is read from the data to place the bins:
quantile bins would make the domain depend on individual records and leak.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sds_core.errors import SdsInputError


def format_number(x: float) -> str:
    """Bin-edge text: integers without ``.0``, others with 12 significant digits.

    >>> format_number(20.0), format_number(0.1 * 3), format_number(-2.5)
    ('20', '0.3', '-2.5')
    """
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return format(float(x), ".12g")


@dataclass(frozen=True, slots=True)
class Binning:
    """Binning of one numeric column into half-open bins ``[lo, hi)`` labelled ``"lo-hi"``.

    Give either ``edges`` or ``width`` (with ``origin``):

    * ``edges`` (ascending, at least 2): bins ``[e_i, e_{i+1})``; the last bin is closed
      (``e_{n-1}`` itself falls in it). Values outside the edges are **not** clipped: they
      go to two open bins labelled ``"<e_0"`` and ``">e_{n-1}"``, so no label ever misstates
      a value's range.
    * ``width`` > 0: bin ``k = floor((x - origin) / width)`` covers
      ``[origin + k*width, origin + (k+1)*width)``; every finite number has a bin.

    The labels present in the prepared domain are those of bins that hold at least one
    record, exactly as for any categorical value in SDS.

    Args:
        column: the column to bin (matched like ``use_columns``: trimmed, case-insensitive).
        edges: explicit bin edges, strictly ascending and finite.
        width: fixed bin width (alternative to ``edges``).
        origin: where the width-based grid starts (default 0).

    >>> b = Binning("age", edges=(0, 18, 65, 120))
    >>> b.labels_for(np.array([-1.0, 0.0, 17.9, 18.0, 120.0, 121.0])).tolist()
    ['<0', '0-18', '0-18', '18-65', '65-120', '>120']
    >>> Binning("age", width=10).labels_for(np.array([5.0, 25.0, -3.0])).tolist()
    ['0-10', '20-30', '-10-0']
    """

    column: str
    edges: tuple[float, ...] | None = None
    width: float | None = None
    origin: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column.strip():
            raise SdsInputError(f"Binning.column must be a non-empty string, got {self.column!r}")
        if (self.edges is None) == (self.width is None):
            raise SdsInputError(
                f"Binning of column {self.column!r}: give exactly one of edges= or width="
            )
        if not math.isfinite(self.origin):
            raise SdsInputError(
                f"Binning.origin of column {self.column!r} must be finite, got {self.origin!r}"
            )
        if self.edges is not None:
            edges = tuple(float(e) for e in self.edges)
            object.__setattr__(self, "edges", edges)
            if len(edges) < 2:
                raise SdsInputError(
                    f"Binning.edges of column {self.column!r} needs at least 2 edges, got {edges}"
                )
            if not all(math.isfinite(e) for e in edges) or any(
                b <= a for a, b in itertools.pairwise(edges)
            ):
                raise SdsInputError(
                    f"Binning.edges of column {self.column!r} must be finite and strictly "
                    f"ascending, got {edges}"
                )
        if self.width is not None:
            width = float(self.width)
            object.__setattr__(self, "width", width)
            if not (math.isfinite(width) and width > 0):
                raise SdsInputError(
                    f"Binning.width of column {self.column!r} must be finite and > 0, got {width}"
                )

    def labels_for(self, values: NDArray[np.float64]) -> NDArray[np.object_]:
        """Bin label of each finite number in ``values`` (vectorized over unique bins)."""
        x = np.asarray(values, dtype=np.float64)
        if self.edges is not None:
            edges = np.asarray(self.edges)
            n = len(edges)
            idx = np.searchsorted(edges, x, side="right") - 1  # -1 below, n-1 at/above last
            idx[x == edges[-1]] = n - 2  # the last bin is closed
            names = [f"<{format_number(edges[0])}"]
            names += [
                f"{format_number(edges[i])}-{format_number(edges[i + 1])}" for i in range(n - 1)
            ]
            names.append(f">{format_number(edges[-1])}")
            return np.asarray(names, dtype=object)[idx + 1]
        width = float(self.width)  # type: ignore[arg-type]
        k = np.floor((x - self.origin) / width)
        uniq, inverse = np.unique(k, return_inverse=True)
        lows = [self.origin + b * width for b in uniq.tolist()]
        names = [f"{format_number(lo)}-{format_number(lo + width)}" for lo in lows]
        return np.asarray(names, dtype=object)[inverse.reshape(-1)]


def declared_bin_labels(
    binning: Binning, lo: float | None, hi: float | None, *, limit: int = 100_000
) -> tuple[str, ...]:
    """Every label a value in the declared range ``[lo, hi]`` can get, in bin order.

    The range is public (the schema's ``min``/``max``), so the labels are a declared domain:
    with ``edges``, the open bins ``"<e_0"``/``">e_{n-1}"`` are included unless the range rules
    them out; with ``width``, both ends of the range are needed (else the bins are unbounded).

    >>> declared_bin_labels(Binning("age", edges=(0, 18, 65, 120)), 0, 120)
    ('0-18', '18-65', '65-120')
    >>> declared_bin_labels(Binning("age", edges=(0, 18, 65)), None, 70)
    ('<0', '0-18', '18-65', '>65')
    >>> declared_bin_labels(Binning("puma", width=1000), 100, 2500)
    ('0-1000', '1000-2000', '2000-3000')
    """
    if binning.edges is not None:
        edges = binning.edges
        out = [] if lo is not None and lo >= edges[0] else [f"<{format_number(edges[0])}"]
        for a, b in itertools.pairwise(edges):
            last = b == edges[-1]
            if (hi is None or a <= hi) and (lo is None or lo < b or (last and lo <= b)):
                out.append(f"{format_number(a)}-{format_number(b)}")
        if hi is None or hi > edges[-1]:
            out.append(f">{format_number(edges[-1])}")
        return tuple(out)
    if lo is None or hi is None:
        raise SdsInputError(
            f"column {binning.column!r}: bins of width {format_number(binning.width or 0)} "
            "have no declared end: give the column a min and a max"
        )
    width = float(binning.width)  # type: ignore[arg-type]
    k_lo = math.floor((lo - binning.origin) / width)
    k_hi = math.floor((hi - binning.origin) / width)
    if k_hi - k_lo + 1 > limit:
        raise SdsInputError(
            f"column {binning.column!r}: bins of width {format_number(width)} over "
            f"[{format_number(lo)}, {format_number(hi)}] make {k_hi - k_lo + 1} bins "
            f"(more than {limit}): use wider bins"
        )
    lows = [binning.origin + k * width for k in range(k_lo, k_hi + 1)]
    return tuple(f"{format_number(a)}-{format_number(a + width)}" for a in lows)


def bin_strings(binning: Binning, texts: Sequence[str]) -> tuple[list[str], NDArray[np.bool_]]:
    """Bin label of each text (trimmed, non-empty) and a mask of texts that are not finite numbers.

    Labels of the masked texts are ``""``; the caller turns the mask into a row number for its
    error message.
    """
    nums = pd.to_numeric(pd.Series(list(texts), dtype=object), errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan
    )
    bad = ~np.isfinite(nums)
    labels = binning.labels_for(np.where(bad, 0.0, nums))
    labels[bad] = ""
    return labels.tolist(), bad
