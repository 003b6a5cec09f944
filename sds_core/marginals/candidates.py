"""A length's candidate set V_k as a recipe, built where it is used.

The engine needs V_k itself (the rows its noise and thresholds run over); a counting backend
needs V_k's :class:`~sds_core.marginals.combinations.CliqueLookup` list next to the records.
Both follow deterministically from a small recipe (the domain and V_1, or the survivors
S_{k−1}), so a cluster backend ships the recipe (S_{k−1}: a few MB) instead of the lookups
(tens of MB per worker and length), each worker builds its own, and the driver builds V_k
while the workers count.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.errors import invariant
from sds_core.marginals._kernels import HAVE_NUMBA, JoinPlan, join_survivors, rows_ascending
from sds_core.marginals.combinations import (
    CliqueLookup,
    build_lookups,
    join_candidates,
    join_plan,
)


class CandidateSet:
    """V_k of one length: given (k = 1, the occurring attributes) or joined from S_{k−1}.

    Pickling sends the recipe only, never what was built. ``attrs`` is built once per copy.

    >>> from sds_core.data.domain import Domain
    >>> dom = Domain(("A", "B"), (("x", "y"), ("u",)))
    >>> v2 = CandidateSet(dom, 2, np.array([[0], [1], [2]], dtype=np.int32))
    >>> v2.attrs.tolist(), v2.size
    ([[0, 2], [1, 2]], 2)
    >>> [lk.cols for lk in v2.lookups(n_records=10)]
    [(0, 1)]
    """

    __slots__ = ("_attrs", "_join", "base", "domain", "length")

    def __init__(self, domain: Domain, length: int, base: NDArray[np.int32]) -> None:
        """``base``: V_1 itself when ``length`` is 1, else the attributes of S_{k−1} (sorted
        rows, as :class:`~sds_core.marginals.aggregates.CombinationCounts` holds them)."""
        self.domain = domain
        self.length = length
        self.base = base
        self._attrs: NDArray[np.int32] | None = None
        self._join: tuple[JoinPlan, NDArray[np.bool_], int] | None = None

    def __reduce__(self) -> tuple[type[CandidateSet], tuple[Domain, int, NDArray[np.int32]]]:
        return (CandidateSet, (self.domain, self.length, self.base))

    def _writable_base(self) -> NDArray[np.int32]:
        # arrays unpickled from a message are read-only, which numba compiles (seconds) and
        # runs slower as a separate type: join a writable copy (a few MB)
        return self.base if self.base.flags.writeable else self.base.copy()

    def _build(self) -> NDArray[np.int32]:
        base = self._writable_base()
        if self.length == 1:
            return base
        return join_candidates(base, self.domain)

    def _joined(self) -> tuple[JoinPlan, NDArray[np.bool_], int] | None:
        """The join (length >= 2, numba) without V_k: made once, kept until the survivors
        are read off it; None when no pair joins."""
        if self._join is None:
            self._join = join_plan(self._writable_base(), self.domain)
        return self._join

    @property
    def attrs(self) -> NDArray[np.int32]:
        """V_k as sorted (n, k) global attribute ids (built on first use, then kept)."""
        if self._attrs is None:
            self._attrs = self._build()
        return self._attrs

    @property
    def size(self) -> int:
        """|V_k|, without building V_k when it was not built yet (length >= 2 with numba: the
        join's count; a cluster's driver needs V_k itself only for the survivors)."""
        if self._attrs is not None or self.length == 1 or not HAVE_NUMBA:
            return int(self.attrs.shape[0])
        joined = self._joined()
        return 0 if joined is None else joined[2]

    def joined_survivors(
        self, noisy: NDArray[np.int64], threshold: float
    ) -> tuple[NDArray[np.int32], NDArray[np.int64]] | None:
        """The rows of V_k whose noisy count (``noisy``, in V_k's order) is > ``threshold``
        and > 0, with those counts, read off the join without building V_k (the (|V_k|, k)
        array, the largest on a cluster's driver); None when V_k is built, the length is 1 or
        numba is absent (then select from :attr:`attrs`). Equal to selecting from
        :attr:`attrs`: the join is walked in V_k's order."""
        if self._attrs is not None or self.length == 1 or not HAVE_NUMBA:
            return None
        joined = self._joined()
        n_cands = 0 if joined is None else joined[2]
        invariant(noisy.shape[0] == n_cands, f"{noisy.shape[0]} noisy counts for |V_k| = {n_cands}")
        if joined is None:
            k = self.length
            return np.zeros((0, k), dtype=np.int32), np.zeros(0, dtype=np.int64)
        plan, keep, _ = joined
        self._join = None  # freed with the survivors' selection
        attrs, kept = join_survivors(plan, keep, noisy, float(threshold))
        invariant(rows_ascending(attrs), "survivors must be sorted and unique")
        return attrs, kept

    def lookups(self, n_records: int) -> list[CliqueLookup]:
        """:func:`~sds_core.marginals.combinations.build_lookups` of V_k, sized for a task that
        counts ``n_records`` records at a time (never changes a count). V_k is not kept when
        it was not built yet (a worker needs only the lookups)."""
        attrs = self._attrs if self._attrs is not None else self._build()
        return build_lookups(self.domain, attrs, n_records=n_records)
