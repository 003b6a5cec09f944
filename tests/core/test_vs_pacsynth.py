"""Against the reference: pac-synth 0.0.8 on PUMS_ca_10k with equal parameters.

pac-synth runs in a subprocess (its Rust logger can be initialised only once per process and
writes to stderr); its debug log gives δ, ε_Q, σ_k, the allowed sensitivities and ρ_k, which
our ``accounting="reference"`` plan must reproduce, and its DP aggregates give the error
baseline our per-length mean absolute error must stay within 20% of.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sds_core.data.preparation import prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.marginals.engine import dp_aggregate, first_threshold, plan_release
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams

RUNS = 8  # pac-synth is unseeded: 8 fits keep the 1.2x comparison stable (3 failed ~15%)
R = 3

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import pandas as pd, pacsynth
    csv, out_path, r, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    pacsynth.init_logger("debug")
    df = pd.read_csv(csv, dtype=str, keep_default_na=False)
    ds = pacsynth.Dataset.from_data_frame(df)
    out = {"exact": ds.get_aggregates(r, ";"), "runs": []}
    for _ in range(runs):
        p = pacsynth.DpAggregateSeededParametersBuilder().reporting_length(r).epsilon(4.0)
        syn = pacsynth.DpAggregateSeededSynthesizer(p.build())
        syn.fit(ds)
        sys.stderr.write("@@@ END OF RUN\\n")
        sys.stderr.flush()
        out["runs"].append({"n": syn.get_dp_number_of_records(), "dp": syn.get_dp_aggregates(";")})
    with open(out_path, "w") as f:
        json.dump(out, f)
    """
)


def _parse_log(text: str) -> dict:
    """The values pac-synth's debug log prints for one fit."""
    return {
        "eps_q": float(re.search(r"percentile epsilon = ([0-9.e-]+)", text).group(1)),
        "sigmas": json.loads(re.search(r"calculated sigmas = (\[[^\]]*\])", text).group(1)),
        "delta": float(re.search(r"delta: ([0-9.e-]+), protected", text).group(1)),
        "allowed": [
            int(x) for x in re.findall(r"allowed sensitivity for \d-counts is (\d+)", text)
        ],
        "max": [
            int(x)
            for x in re.findall(r"allowed sensitivity for \d-counts is \d+ out of (\d+)", text)
        ],
        "thresholds": [float(x) for x in re.findall(r"used threshold = ([0-9.e-]+)", text)],
    }


@pytest.fixture(scope="module")
def reference(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """pac-synth's exact and DP aggregates plus parsed logs for RUNS fits."""
    pytest.importorskip("pacsynth")
    csv = shared_data / "pums" / "PUMS_ca_10k.csv"
    out_path = tmp_path_factory.mktemp("pacsynth") / "out.json"
    cmd = [sys.executable, "-c", _SCRIPT, str(csv), str(out_path), str(R), str(RUNS)]
    # one pipe for stdout and stderr: the run markers stay in order with the Rust log lines
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    out = json.loads(out_path.read_text())
    logs = proc.stdout.split("@@@ END OF RUN")[:RUNS]
    for run, log in zip(out["runs"], logs, strict=True):
        run["log"] = _parse_log(log)
    out["csv"] = csv
    return out


def _mae_by_len(exact: dict[str, int], dp: dict[str, int]) -> dict[int, float]:
    """Spec §4 mean error: mean |exact − dp| over combinations present in both, per length."""
    errs: dict[int, list[int]] = {}
    for key, c in dp.items():
        if key in exact:
            errs.setdefault(key.count(";") + 1, []).append(abs(exact[key] - c))
    return {k: float(np.mean(v)) for k, v in errs.items()}


@pytest.mark.pacsynth
@pytest.mark.shared
def test_same_noise_parameters_as_pac_synth(reference: dict) -> None:
    """Given pac-synth's protected count, our reference plan has its δ, ε_Q, σ_k and ρ_1."""
    params = DpParams(epsilon=4.0, reporting_length=R, accounting="reference")
    for run in reference["runs"]:
        log = run["log"]
        plan = plan_release(params, run["n"])
        assert plan.delta == pytest.approx(log["delta"], rel=1e-12)
        assert plan.epsilon_percentile == pytest.approx(log["eps_q"], rel=1e-9)
        assert plan.sigma_by_len == pytest.approx(tuple(log["sigmas"]), rel=1e-9)
        assert len(log["allowed"]) == R and len(log["thresholds"]) == R
        rho_1 = first_threshold(plan.sigma_by_len[0], log["allowed"][0], plan.delta)
        assert rho_1 == pytest.approx(log["thresholds"][0], rel=1e-9)
        assert log["thresholds"][1:] == [0.0] * (R - 1)  # uncontrolled: η = 1 ⇒ ρ_k = 0


@pytest.mark.pacsynth
@pytest.mark.shared
def test_exact_aggregates_match_pac_synth(reference: dict) -> None:
    """Our preprocessing + exact aggregation equals pac-synth's get_aggregates."""
    df = pd.read_csv(reference["csv"], dtype=str, keep_default_na=False)
    ours = exact_aggregates(prepare(df), R).to_text_dict()
    assert ours == reference["exact"]


def _mean_errors(table, params: DpParams, exact: dict[str, int]) -> tuple[dict, list]:
    maes: dict[int, list[float]] = {}
    allowed = []
    for seed in range(RUNS):
        res = dp_aggregate(table, params, ReleaseRandomness.from_seed(seed))
        allowed.append(res.report.allowed_sensitivity_by_len)
        for k, v in _mae_by_len(exact, res.aggregates.to_text_dict()).items():
            maes.setdefault(k, []).append(v)
    return {k: float(np.mean(v)) for k, v in maes.items()}, allowed


@pytest.mark.slow
@pytest.mark.pacsynth
@pytest.mark.shared
def test_mean_error_within_20_percent_of_pac_synth(reference: dict) -> None:
    """Per-length MAE (mean over seeds) within 1.2x pac-synth's, for three configurations.

    1. ``accounting="reference"`` with the DP-percentile range capped at pac-synth's own
       (data-dependent) range for the longest length: same noise parameters and candidate
       range, so this isolates bounding, noise, thresholds and finalisation.
    2. ``accounting="reference"`` with our data-independent range 0..C(d, k): passes since the
       percentile's base measure μ(v) ≈ (v+1)^-2 (before it, k = 3 was ~24% above pac-synth).
    3. The product default (``"tight"`` accounting, data-independent range 0..C(d, k)).
    Measured over 10 seeds when written, MAE ratio ours/pac-synth for k = 1, 2, 3:
    (1) 1.01, 1.10, 1.04; (2) 1.01, 1.10, 1.12; (3) 0.90, 0.91, 0.90.
    """
    exact = reference["exact"]
    table = prepare(pd.read_csv(reference["csv"], dtype=str, keep_default_na=False))
    theirs: dict[int, list[float]] = {}
    for run in reference["runs"]:
        for k, v in _mae_by_len(exact, run["dp"]).items():
            theirs.setdefault(k, []).append(v)
    base = {k: float(np.mean(v)) for k, v in theirs.items()}
    cap = max(run["log"]["max"][-1] for run in reference["runs"])
    configs = {
        "reference, pac-synth range": DpParams(accounting="reference", sensitivity_cap=cap),
        "reference, data-independent range": DpParams(accounting="reference"),
        "tight default": DpParams(),
    }
    for name, params in configs.items():
        ours, allowed = _mean_errors(table, params, exact)
        for k in range(1, R + 1):
            assert ours[k] <= 1.2 * base[k], (name, k, ours, base, allowed)
