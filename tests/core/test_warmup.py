"""Tests of sds_core.marginals.warmup (loading the aggregation kernels before a release) and
sds_core.warmup (compiling every kernel before the tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sds_core._jit import HAVE_NUMBA
from sds_core.marginals.warmup import WARMUP_COPIES, WARMUP_VALUES, load_kernels, warmup_table

PROJECT = Path(__file__).resolve().parents[2]

# Run in a fresh interpreter before each script below: every compiled kernel of the sds_core
# modules loaded so far with its signatures, and those added since a snapshot.
_SIGNATURES = r"""
import json, sys
import numba

def signatures():
    out = {}
    for name, mod in list(sys.modules.items()):
        if not name.startswith("sds_core"):
            continue
        for attr in dir(mod):
            f = getattr(mod, attr)
            if isinstance(f, numba.core.registry.CPUDispatcher):
                key = f"{f.py_func.__module__}.{f.py_func.__qualname__}"
                out[key] = sorted(str(s) for s in f.signatures)
    return out

def added(before):
    new = {k: sorted(set(v) - set(before.get(k, []))) for k, v in signatures().items()}
    return {k: v for k, v in new.items() if v}
"""

# The signatures after ``load_kernels``, then the ones a real table's aggregation added (must be
# none), and numba's registries.
_AGGREGATION = r"""
from sds_core.marginals.warmup import load_kernels

before_any = "numba.np.arraymath" in sys.modules
load_kernels()
loaded = signatures()
registries = "numba.np.arraymath" in sys.modules
if len(sys.argv) > 1:
    import pandas as pd
    from sds_core.data.preparation import PrepareParams, prepare
    from sds_core.dp.randomness import ReleaseRandomness
    from sds_core.marginals.engine import dp_aggregate
    from sds_core.marginals.params import DpParams

    frame = pd.read_csv(sys.argv[1], dtype=str, keep_default_na=False)
    table = prepare(frame, PrepareParams())
    dp_aggregate(table, DpParams(epsilon=4.0, reporting_length=3), ReleaseRandomness.from_seed(1))
print(json.dumps({
    "before_any": before_any,
    "registries": registries,
    "loaded": loaded,
    "added": added(loaded),
}))
"""

# The signatures after ``compile_kernels``, then the ones the stages of a real release add on
# the example (must be none).
_COMPILE = r"""
import numpy as np
import pandas as pd
from sds_core.warmup import SYNTHESIS_MODES, compile_kernels

compile_kernels()
loaded = signatures()

from sds_core.data.preparation import PrepareParams, prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.params import DpParams
from sds_core.synthesis.generator import synthesize

frame = pd.read_csv(sys.argv[1], dtype=str, keep_default_na=False)
table = prepare(frame, PrepareParams())
for length in (2, 3):
    result = dp_aggregate(
        table, DpParams(epsilon=4.0, reporting_length=length), ReleaseRandomness.from_seed(1)
    )
    for _, params in SYNTHESIS_MODES:
        synthetic = synthesize(result.aggregates, params, rng=np.random.default_rng(1))
    evaluate_release(table, synthetic, result.aggregates)
# and a small release as the tests make them (400 rows, 5 columns of few values: int8 codes
# once the evaluation compacts them), R = 2, with publishing's order of each length's counts
from sds_core.marginals.aggregates import count_text_order

small = prepare(frame[["sex", "age", "educ", "married", "inc_cat"]].iloc[:400], PrepareParams())
result = dp_aggregate(
    small, DpParams(epsilon=4.0, reporting_length=2), ReleaseRandomness.from_seed(1)
)
synthetic = synthesize(result.aggregates, rng=np.random.default_rng(1))
evaluate_release(small, synthetic, result.aggregates)
for k in sorted(result.aggregates.by_len):
    count_text_order(result.aggregates.domain, result.aggregates.counts_of(k))
print(json.dumps({"loaded": sorted(k for k, v in loaded.items() if v), "added": added(loaded)}))
"""

AGGREGATION_KERNELS = [
    "sds_core.marginals._kernels.present_attributes",
    "sds_core.marginals._kernels.clique_order",
    "sds_core.marginals._kernels.row_local_keys",
    "sds_core.marginals._kernels.rows_ascending",
    "sds_core.marginals._kernels.join_keep",
    "sds_core.marginals._kernels.join_fill",
    "sds_core.marginals._kernels.join_survivors",
    "sds_core.marginals._kernels.distinct_rows",
    "sds_core.marginals._kernels.count_clique_dense",
    "sds_core.marginals._kernels.count_clique_sorted",
    "sds_core.marginals._kernels.noisy_survivors",
    "sds_core.dp.noise.cdf_guide",
    "sds_core.dp.noise.add_guided",
    "sds_core.marginals.normalization.min_over_subsets",
]


def _fresh(script: str, *args: str) -> dict:
    """The JSON that ``script`` (after :data:`_SIGNATURES`) prints last in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", _SIGNATURES + script, *args],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_warmup_table_holds_the_diagonal_combinations() -> None:
    """Every record repeats one value in all three columns, WARMUP_COPIES times each."""
    table = warmup_table()
    assert table.codes.shape == (WARMUP_VALUES * WARMUP_COPIES, 3)
    assert table.codes.dtype == np.int32 and table.codes.flags.c_contiguous
    assert (table.codes == table.codes[:, :1]).all()
    assert np.bincount(table.codes[:, 0]).tolist() == [WARMUP_COPIES] * WARMUP_VALUES


def test_load_kernels_is_idempotent() -> None:
    """A second call (the process already warm) runs again without error."""
    load_kernels()
    load_kernels()


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed: nothing to load")
def test_load_kernels_loads_every_aggregation_kernel() -> None:
    """In a fresh process, every kernel of count / aggregate-k / normalize has its machine code
    after load_kernels, and numba's CPU target is initialised (its registries imported)."""
    out = _fresh(_AGGREGATION)
    assert not out["before_any"]  # importing the kernels does not initialise numba's target
    assert out["registries"]
    missing = [name for name in AGGREGATION_KERNELS if not out["loaded"].get(name)]
    assert missing == []


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed: nothing to load")
def test_a_real_aggregation_after_load_kernels_loads_nothing_new(example_csv: Path) -> None:
    """The PUMS example (11 columns, 10k rows, R = 3: dense and sorted-key cliques, the guided
    noise sampler) calls no kernel with a type load_kernels did not load."""
    out = _fresh(_AGGREGATION, str(example_csv))
    assert out["added"] == {}


@pytest.mark.slow  # ~12 s: the warm-up and the stages of two releases in a fresh interpreter
@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed: nothing to compile")
def test_a_real_release_after_compile_kernels_compiles_nothing_new(example_csv: Path) -> None:
    """sds_core.warmup (``make kernels``): the example (10k rows, raw PUMA codes) aggregated at
    R = 2 and 3, synthesized in every mode and evaluated, then a small release of its first 400
    rows (published in order), calls no kernel with a type compile_kernels did not compile; and
    compile_kernels reaches the kernels of every stage."""
    out = _fresh(_COMPILE, str(example_csv))
    assert out["added"] == {}, json.dumps(out["added"], indent=1)
    stages = {name.split(".")[1] for name in out["loaded"]}
    assert {"marginals", "dp", "synthesis", "model"} <= stages
