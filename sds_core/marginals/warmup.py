"""Loading the DP aggregation's compiled kernels into a process before it runs a release.

numba compiles nothing at import. In a fresh process the first kernel call initialises numba's
CPU target (:func:`sds_core._jit.load_compiler`, 0.2-0.6 s) and each kernel's first call loads
its machine code from the disk cache (~10 ms each): a release pays both in ``aggregate-1``, its
first compiled stage. A process that forks releases (the home's release runner) calls
:func:`load_kernels` once before it forks, so each release starts with the kernels loaded.
"""

from __future__ import annotations

import numpy as np

from sds_core._jit import HAVE_NUMBA, load_compiler
from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.marginals.candidates import CandidateSet
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.params import DpParams

__all__ = ["load_kernels", "warmup_table"]

WARMUP_VALUES = 128
"""Values per column of :func:`warmup_table`: 3·128² = 49,152 length-2 candidates (enough for
the guided noise sampler) and a 129³-cell length-3 clique (counted by sorted-key search)."""
WARMUP_COPIES = 16
"""Records per value: a count of 16 clears every threshold at :data:`WARMUP_EPSILON`."""
WARMUP_EPSILON = 20.0
"""A large ε (the noise samplers' bound fits δ/2 up to ε ≈ 24 here): the noise is small and
every combination that occurs survives."""


def warmup_table() -> PreparedTable:
    """A public, made-up table whose aggregation runs every path the compiled kernels serve.

    Three columns of :data:`WARMUP_VALUES` values; record r holds value ``r mod 128`` in every
    column, so the combinations that occur are the 128 diagonal ones of each length.

    >>> t = warmup_table()
    >>> t.n_records, t.domain.n_columns, t.domain.cardinalities
    (2048, 3, (128, 128, 128))
    """
    labels = tuple(f"{v:03d}" for v in range(WARMUP_VALUES))
    domain = Domain(("a", "b", "c"), (labels, labels, labels))
    column = np.arange(WARMUP_VALUES * WARMUP_COPIES, dtype=np.int32) % WARMUP_VALUES
    codes = np.ascontiguousarray(np.stack([column, column, column], axis=1))
    return PreparedTable(domain, codes)


def load_kernels() -> None:
    """Initialise numba and load every kernel of the count, aggregate-k and normalize stages.

    Runs :func:`~sds_core.marginals.engine.dp_aggregate` (R = 3) on :func:`warmup_table` with a
    fixed seed and discards the result, then the survivors read off the join as a cluster's
    driver does: no sensitive data and no release randomness is involved.
    Idempotent (later calls only repeat ~20 ms of work); without numba it does nothing. It
    starts no thread of its own, but numba's initialisation imports ``scipy.linalg``, whose
    OpenBLAS starts its thread pool at import (a fork shuts it down).
    """
    if not HAVE_NUMBA:
        return
    load_compiler()
    params = DpParams(epsilon=WARMUP_EPSILON, reporting_length=3, delta=1e-6)
    table = warmup_table()
    dp_aggregate(table, params, ReleaseRandomness.from_seed(0), release_label="warmup")
    # a cluster's driver reads the survivors off the join, never building V_k (the local
    # backend above builds it): that kernel too, with the driver's argument types
    ones = np.arange(table.domain.n_attributes, dtype=np.int32).reshape(-1, 1)
    pairs = CandidateSet(table.domain, 2, ones)
    pairs.joined_survivors(np.zeros(pairs.size, dtype=np.int64), 0.0)
