"""The SDS engine's 1-tuple step over declared domains, and re-encoding for lengths k >= 2.

Used by :func:`sds_core.marginals.engine.aggregate_length` when ``DpParams.declared_domains``
covers every column: length 1 noises the declared values (:func:`sds_core.dp.declared.
declared_one_tuples`) and releases a DP domain; lengths k >= 2 then run on the table
re-encoded into that domain (:func:`reencode`), so no data-derived label is ever released.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import EMPTY_CODE, DeclaredDomain, Domain
from sds_core.data.table import PreparedTable
from sds_core.dp import noise
from sds_core.errors import SdsInputError, require


def check_declared(domain: Domain, declared: Sequence[DeclaredDomain]) -> bool:
    """True when ``declared`` covers every column of ``domain``, False when it is empty.

    Raises:
        SdsInputError: a partial declaration (some columns without a domain) or declared
            domains for columns that are not in the table. All or nothing: a single
            data-derived column would bring back the data-dependent 1-tuple universe (and its
            δ/2 set-union term) for the whole release.
    """
    if not declared:
        return False
    names = {d.column for d in declared}
    missing = [c for c in domain.columns if c not in names]
    unknown = sorted(names - set(domain.columns))
    if unknown:
        raise SdsInputError(
            f"declared_domains name columns that are not in the table: {unknown}; the table "
            f"has {list(domain.columns)}. Remove them or fix the column names"
        )
    if missing:
        raise SdsInputError(
            f"declared_domains must cover every column or none; these columns have no declared "
            f"domain: {missing}. Declare a value list or size for each of them, or drop "
            "declared_domains to use the data-derived 1-tuple step"
        )
    return True


def declared_threshold(sigma: float, n_values: int, tolerance: float) -> int:
    """The 1-tuple threshold over declared domains: the smallest integer t >= 0 with

        P(Z > t) <= 1 − tolerance^(1/N),  Z ~ N_Z(0, σ²) (the noise module's table),

    so that, with probability >= ``tolerance``, none of the N declared values absent from the
    data is released (CatHist's tolerance ρ, with the Gaussian tail). N is the total declared
    size (public), σ = σ_1√Δ_1 (DP). Post-processing only: it changes utility, not privacy.

    >>> declared_threshold(5.0, 10, 0.5), declared_threshold(5.0, 10**10, 0.5)
    (7, 32)
    """
    require(n_values >= 1, f"the declared domains must hold at least one value, got {n_values}")
    target = -math.expm1(math.log(tolerance) / n_values)  # 1 − tolerance^(1/N)
    table = noise.noise_table("gaussian", sigma)
    # P(Z > t) = 1 − cdf[t − offset]; need 2^64·(1 − cdf) <= 2^64·target
    limit = (1 << 64) - math.floor(target * 2.0**64)
    if limit >= 1 << 64:
        idx = table.cdf_u64.size  # only P(Z > t) = 0 will do: the top of the table
    else:
        idx = int(np.searchsorted(table.cdf_u64, np.uint64(limit), side="left"))
    return max(idx + table.offset, 0)


def code_maps(data_domain: Domain, released: Domain) -> tuple[NDArray[np.int32], ...]:
    """Per column: data code -> code in ``released`` with the same label, -1 if absent."""
    require(
        data_domain.columns == released.columns,
        f"the released domain's columns {list(released.columns)} differ from the table's "
        f"{list(data_domain.columns)}",
    )
    out = []
    for data_labs, rel_labs in zip(data_domain.labels, released.labels, strict=True):
        pos = {lab: i for i, lab in enumerate(rel_labs)}
        out.append(
            np.fromiter(
                (pos.get(lab, EMPTY_CODE) for lab in data_labs), np.int32, count=len(data_labs)
            )
        )
    return tuple(out)


def reencode(table: PreparedTable, domain: Domain) -> PreparedTable:
    """The table with every value re-coded into ``domain`` (the released 1-tuple domain).

    Values whose label is not in ``domain`` (undeclared, or not released at length 1) become
    empty. Deterministic from the labels alone, so a resumed stage re-encodes identically.
    A table already in ``domain`` is returned as is.

    >>> t = PreparedTable(Domain(("A",), (("a", "b", "c"),)), np.array([[0], [1], [2], [-1]]))
    >>> reencode(t, Domain(("A",), (("b", "c", "z"),))).codes.ravel().tolist()
    [-1, 0, 1, -1]
    """
    if table.domain == domain:
        return table
    maps = code_maps(table.domain, domain)
    codes = np.empty_like(table.codes)
    for j, m in enumerate(maps):
        col = table.codes[:, j]
        lookup = np.append(m, EMPTY_CODE)  # index -1 (empty) -> the appended EMPTY_CODE
        codes[:, j] = lookup[col]
    return PreparedTable(domain, codes, table.multi_value_columns)


def active_counts_by_column(
    domain: Domain, attrs: NDArray[np.int32], counts: NDArray[np.int64]
) -> dict[int, NDArray[np.int64]]:
    """Column index -> count of each data label, from 1-tuple candidates (global ids)."""
    flat = np.zeros(domain.n_attributes, dtype=np.int64)
    flat[np.asarray(attrs).ravel()] = counts
    off = domain.offsets
    return {j: flat[off[j] : off[j + 1]] for j in range(domain.n_columns)}
