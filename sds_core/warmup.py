"""Compiling every kernel a release runs, once, before any release needs it.

numba compiles a kernel on its first call and keeps the machine code in its disk cache
(``cache=True``, next to the sources): the first process that calls a kernel pays the compile
(~40 CPU-s for all of them on 2 cores), every later process loads it (~10 ms a kernel). A fresh
checkout that starts several processes at once (a test run, a cluster's workers, a release
beside a server) would compile the same kernels in each of them. :func:`compile_kernels` runs
each stage of a release on :func:`~sds_core.marginals.warmup.warmup_table`, a public made-up
table, and discards the results: the aggregation (:func:`~sds_core.marginals.warmup.load_kernels`),
the aggregate-seeded synthesis in each of its modes (completion, SDS's reference, matching,
1-way reconciliation), the consistent model's sampler and the evaluation, then a small release
(a few values a column, R = 2, its counts put in publishing's order). ``make test`` and
``make test-fast`` run it first (``make kernels``: ``python -m sds_core.warmup``). No sensitive
data and no release randomness is involved.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from sds_core._jit import HAVE_NUMBA
from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals.aggregates import AggregateSet, count_text_order
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.params import DpParams
from sds_core.marginals.warmup import WARMUP_EPSILON, load_kernels, warmup_table
from sds_core.synthesis.consistent import AggregateNoise, synthesize_from_model
from sds_core.synthesis.generator import synthesize
from sds_core.synthesis.params import SynthesisParams

__all__ = ["compile_kernels"]

SYNTHESIS_MODES: tuple[tuple[str, SynthesisParams], ...] = (
    ("completion", SynthesisParams()),
    ("reference", SynthesisParams(complete_records=False)),
    ("matching", SynthesisParams(match_aggregates=True, reconcile_one_way=True)),
)
"""The synthesis kernels' callers: the default completion, SDS's reference mode (records left
incomplete), the matching search and the 1-way reconciliation."""


def compile_kernels(progress: Callable[[str], None] | None = None) -> None:
    """Compile (or load from numba's disk cache) the kernels of every stage of a release.

    Idempotent: with the cache written, a second call loads and reruns in ~2 s. Without numba
    it does nothing. ``progress`` is told each stage as it starts.
    """
    if not HAVE_NUMBA:
        return
    say = progress or (lambda _stage: None)
    say("aggregation")
    load_kernels()
    # R = 3: the synthesis kernels take the same types at R = 2 (empty triple lists, int32 too)
    table = warmup_table()
    aggregates = _aggregate(table, reporting_length=3)
    for name, synthesis in SYNTHESIS_MODES:
        say(f"synthesis ({name})")
        synthetic = synthesize(aggregates, synthesis, rng=np.random.default_rng(0))
    say("evaluation")
    evaluate_release(table, synthetic, aggregates)
    # the evaluation's compacted codes: int8 above, int16 here (raw codes such as PUMAs; int32,
    # above 32,767 values, compiles on first use), 1,100² cells: a pair counted by sorted keys
    say("evaluation (1100 values in a column)")
    _release(_table(1_100, 1_100), reporting_length=3)
    # a table of a few values a column, as most releases' (the example's, the tests'): the
    # evaluation compacts its codes to int8 and compares tables of them, R = 2 takes the
    # length-2 paths, and publishing orders each length's counts by packed text keys
    say("a small release (a few values a column, R = 2)")
    _release(_table(4, 400), reporting_length=2)
    say("consistent model")
    synthesize_from_model(
        _aggregate(_table(4, 400, binary=0), reporting_length=2),
        AggregateNoise((1.0, 1.0), (1.0, 1.0)),
        None,
        rng=np.random.default_rng(0),
    )


def _aggregate(table: PreparedTable, *, reporting_length: int) -> AggregateSet:
    """The DP aggregates of ``table`` (seed 0, :data:`WARMUP_EPSILON`)."""
    params = DpParams(epsilon=WARMUP_EPSILON, reporting_length=reporting_length, delta=1e-6)
    rnd = ReleaseRandomness.from_seed(0)
    return dp_aggregate(table, params, rnd, release_label="warmup").aggregates


def _release(table: PreparedTable, *, reporting_length: int) -> None:
    """A release's compiled stages on ``table``: aggregate, synthesize (the default mode),
    evaluate, and publishing's order of each length's counts."""
    aggregates = _aggregate(table, reporting_length=reporting_length)
    synthetic = synthesize(aggregates, rng=np.random.default_rng(0))
    evaluate_release(table, synthetic, aggregates)
    for k in sorted(aggregates.by_len):
        count_text_order(aggregates.domain, aggregates.counts_of(k))


def _table(values: int, rows: int, binary: int = 4) -> PreparedTable:
    """Two columns of ``values`` values (record r holds r and r // 2 mod values), one of 4
    (r mod 4) and ``binary`` of 2 (bit b of r): the evaluation counts the low-cardinality
    columns jointly and the wide ones by sorted keys. The consistent model's fit is pure numpy
    (only its sampler is compiled): it warms up on 4 values a column, a short fit."""
    r = np.arange(rows, dtype=np.int32)
    bits = [(r >> b) & 1 for b in range(binary)]
    codes = np.stack([r % values, (r // 2) % values, r % 4, *bits], axis=1)
    labels = tuple(f"{v:05d}" for v in range(values))
    names = ("x", "y", "z", *(f"b{b}" for b in range(binary)))
    domain = Domain(names, (labels, labels, ("0", "1", "2", "3"), *((("0", "1"),) * binary)))
    return PreparedTable(domain, np.ascontiguousarray(codes))


def main() -> None:
    """``python -m sds_core.warmup``: compile every kernel, saying each stage on one line."""
    start = time.perf_counter()
    compile_kernels(lambda stage: print(f"compiling the kernels: {stage}", flush=True))
    print(f"compiled the kernels in {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
