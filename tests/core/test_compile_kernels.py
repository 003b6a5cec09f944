"""Tests of sds_core.warmup: ``make setup`` compiles every kernel a release runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sds_core._jit import HAVE_NUMBA

PROJECT = Path(__file__).resolve().parents[2]

# In a fresh interpreter: every compiled kernel's signatures after ``compile_kernels``, then the
# ones the stages of a real release add on the example (must be none).
_SCRIPT = r"""
import json, sys
import numba
import numpy as np
import pandas as pd
from sds_core.warmup import compile_kernels

def signatures():
    out = {}
    for name, mod in list(sys.modules.items()):
        if not name.startswith("sds_core"):
            continue
        for attr in dir(mod):
            f = getattr(mod, attr)
            if isinstance(f, numba.core.registry.CPUDispatcher):
                out[f"{f.py_func.__module__}.{f.py_func.__qualname__}"] = sorted(
                    str(s) for s in f.signatures
                )
    return out

compile_kernels()
loaded = signatures()

from sds_core.data.preparation import PrepareParams, prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.params import DpParams
from sds_core.synthesis.consistent import AggregateNoise, synthesize_from_model
from sds_core.synthesis.generator import synthesize
from sds_core.warmup import SYNTHESIS_MODES

frame = pd.read_csv(sys.argv[1], dtype=str, keep_default_na=False)
table = prepare(frame, PrepareParams())
for length in (2, 3):
    result = dp_aggregate(
        table, DpParams(epsilon=4.0, reporting_length=length), ReleaseRandomness.from_seed(1)
    )
    for _, params in SYNTHESIS_MODES:
        synthetic = synthesize(result.aggregates, params, rng=np.random.default_rng(1))
    evaluate_release(table, synthetic, result.aggregates)
after = signatures()
added = {k: sorted(set(v) - set(loaded.get(k, []))) for k, v in after.items()}
print(json.dumps({"loaded": sorted(k for k, v in loaded.items() if v),
                  "added": {k: v for k, v in added.items() if v}}))
"""


@pytest.mark.slow  # ~12 s: the warm-up and the stages of two releases in a fresh interpreter
@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed: nothing to compile")
def test_a_real_release_after_compile_kernels_compiles_nothing_new(example_csv: Path) -> None:
    """The example (10k rows, raw PUMA codes) aggregated at R = 2 and 3, synthesized in every
    mode and evaluated calls no kernel with a type compile_kernels did not compile; and
    compile_kernels reaches the kernels of every stage."""
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(example_csv)],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["added"] == {}, json.dumps(out["added"], indent=1)
    stages = {name.split(".")[1] for name in out["loaded"]}
    assert {"marginals", "dp", "synthesis", "model"} <= stages
