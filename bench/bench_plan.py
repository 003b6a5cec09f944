"""Benchmark (issue #22): today's default, the planned default, aim, mst, independent, per seed.

For each PUMS set (10k/100k, raw/binned, ε 1/4/10, plus 1M binned ε 4) and each seed: the data
(a seeded resample above 10k), then every method at the same (ε, δ = 1e-6) with the same seed.
Printed per method: mean TVD1 / TVD2 / TVD3 over all 1-/2-/3-way marginals (empty counted as a
value) and, for the SDS methods, the agreement figure: the share of released 1-way values whose
synthetic count lies within the published 95% noise interval (±1.96·σ_1·√Δ_1) of their DP count.
A summary table checks the issue's targets (planned TVD2 <= 1.15 x aim's and <= today's default;
TVD1 <= max(2 x aim's, 0.01)). Results are cached per (set, seed, method) in
bench/out/plan-cache.jsonl so a rerun only computes what is missing (--fresh recomputes).

    .venv/bin/python bench/bench_plan.py                                # all 13 sets, seeds 0 1 2
    .venv/bin/python bench/bench_plan.py --sets 10k-raw-1 --seeds 0 --methods default plan
    .venv/bin/python bench/bench_plan.py --sets 10k-binned-4 --methods "sds:R=2,synth=model"

An ``sds:`` method is an explicit SDS configuration: ``R`` (reporting length), ``props``
(sigma_proportions p_1:...:p_R), ``synth`` (records, records+1way, model), ``fab`` (adaptive η_2:...
for lengths 2..R), ``np`` (record-count ε share), ``qp`` (percentile share), ``iters`` (model
iterations), ``tree`` (``pairs``: the model's pair-dependence structure; ``g``: G-statistic),
``cells`` (the model's max_model_cells).
``plan`` is :func:`sds_core.marginals.plan.plan_sds` applied to the DP record count.

Issue 39's suite (``--suite``, sets in ``bench/plan_suite.py``): every public set at ε 0.5, 1,
2, 4, 10 (a set is named ``NAME@EPS``, e.g. ``yrbss@4``), the planned default (what a release
does with no ``reporting_length`` and no ``synthesis``: the same core calls), ``aim``, ``mst``
and ``pac-synth`` (the reference, R = 3, its own unseeded noise), cached in
bench/results/plan-suite.jsonl; the last table compares them cell by cell.

    .venv/bin/python bench/bench_plan.py --suite                        # 12 sets x 5 ε x 3 seeds
    .venv/bin/python bench/bench_plan.py --suite --sets yrbss@4 --seeds 0
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# one core per benchmark process on a shared machine (BLAS, OpenMP and numba threads)
os.environ["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
os.environ["OPENBLAS_NUM_THREADS"] = os.environ.get("OPENBLAS_NUM_THREADS", "1")
os.environ["NUMBA_NUM_THREADS"] = os.environ.get("NUMBA_NUM_THREADS", "1")

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_synthesis import DATA, bin_columns, independent
from plan_suite import EPSILONS, SUITE, available

from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.intervals import Z_95
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.agreement import agreement
from sds_core.evaluation.metrics import marginal_fidelity
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.marginals.engine import (
    aggregate_length,
    finalize,
    plan_release,
    privacy_report,
    protect_record_count,
    release_delta_parts,
)
from sds_core.marginals.params import AccuracyMode, DpParams, FabricationMode
from sds_core.marginals.privacy_report import PrivacyReport
from sds_core.synthesis.consistent import (
    DEFAULT_MAX_MODEL_CELLS,
    AggregateNoise,
    ModelParams,
    estimated_total,
    fit_aggregates,
    records_of,
)
from sds_core.synthesis.generator import (
    REFERENCE_PARAMS,
    SynthesisParams,
    domain_from_text_keys,
    synthesize,
)
from sds_core.synthesizers import create

DELTA = 1e-6
LABEL = "release"  # the noise labels of dp_aggregate, as bench_models.py
CACHE = Path(__file__).resolve().parent / "out" / "plan-cache.jsonl"
SUITE_CACHE = Path(__file__).resolve().parent / "results" / "plan-suite.jsonl"
SUITE_METHODS = ("plan", "aim", "mst", "pac-synth")
PLAN_TAG = ""  # --plan-tag: names the plan's code in the cache key (its rules changed)
ALL_SETS = (
    *(
        f"{size}-{kind}-{eps}"
        for size in ("10k", "100k")
        for kind in ("raw", "binned")
        for eps in (1, 4, 10)
    ),
    "1m-binned-4",
)
SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
_MODEL_CELLS: list[int] = []  # cells of the last fitted model (reported beside its result)
SET_NAME = re.compile(r"(10k|100k|1m)-(raw|binned)-\d+(\.\d+)?")
"""Any set :func:`data_set` can build (the 13 of ALL_SETS are the benchmark's)."""
DEFAULT_METHODS = ("default", "plan", "aim", "mst", "independent")


def load() -> str:
    """The 1-minute load average (the machine is shared: timings depend on it)."""
    return Path("/proc/loadavg").read_text().split()[0]


@dataclass(frozen=True)
class DataSet:
    """One benchmark set: the sensitive table of one seed and its ε."""

    name: str
    epsilon: float
    original: PreparedTable
    frame: pd.DataFrame | None = None  # the input as text (pac-synth reads it)


def data_set(name: str, seed: int) -> DataSet:
    """The PUMS sample (or its seeded resample), raw or with age/income binned; or a suite
    set ``NAME@EPS`` (bench/plan_suite.py)."""
    if "@" in name:
        set_name, eps_text = name.split("@")
        frame = SUITE[set_name].load(seed)
        return DataSet(name, float(eps_text), prepare(frame), frame)
    size, kind, eps = name.split("-")
    n = SIZES[size]
    frame = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    if n != len(frame):
        rng = np.random.default_rng(seed)
        frame = frame.iloc[rng.integers(0, len(frame), size=n)].reset_index(drop=True)
    if kind == "binned":
        frame = bin_columns(frame)
    return DataSet(name, float(eps), prepare(frame))


# ------------------------------------------------------------------ SDS configurations
@dataclass(frozen=True)
class SdsConfig:
    """An explicit SDS release: DP parameters and the synthesis from the aggregates."""

    params: DpParams
    synthesis: str = "records"
    iterations: int = 100
    structure: str = "g-statistic"
    max_model_cells: int = DEFAULT_MAX_MODEL_CELLS

    def key(self) -> str:
        """Canonical text of the configuration (the cache key)."""
        p = self.params
        props = ":".join(f"{x:g}" for x in p.sigma_proportions)
        fab = ":".join(f"{v:g}" for _, v in sorted(p.fabrication_thresholds().items()))
        return (
            f"sds:R={p.reporting_length},props={props},synth={self.synthesis},fab={fab},"
            f"np={p.number_of_records_epsilon_proportion:g},"
            f"qp={p.percentile_epsilon_proportion:g},iters={self.iterations}"
            + (",tree=pairs" if self.structure == "pair-dependence" else "")
            + (
                f",cells={self.max_model_cells}"
                if self.max_model_cells != DEFAULT_MAX_MODEL_CELLS
                else ""
            )
        )


def parse_config(spec: str, epsilon: float) -> SdsConfig:
    """``sds:R=2,props=1:1,synth=model,...`` (unset keys: DpParams/SynthesisParams defaults)."""
    fields = dict(kv.split("=", 1) for kv in spec.removeprefix("sds:").split(",") if kv)
    r = int(fields.get("R", 3))
    kwargs: dict[str, Any] = {"epsilon": epsilon, "delta": DELTA, "reporting_length": r}
    if "props" in fields:
        kwargs["accuracy_mode"] = AccuracyMode.custom(
            [float(x) for x in fields["props"].split(":")]
        )
    if "fab" in fields:
        etas = [float(x) for x in fields["fab"].split(":")]
        kwargs["fabrication_mode"] = FabricationMode.custom_adaptive(
            {k: e for k, e in zip(range(2, r + 1), etas, strict=True)}
        )
    if "np" in fields:
        kwargs["number_of_records_epsilon_proportion"] = float(fields["np"])
    if "qp" in fields:
        kwargs["percentile_epsilon_proportion"] = float(fields["qp"])
    structure = {"pairs": "pair-dependence", "g": "g-statistic"}[fields.get("tree", "g")]
    return SdsConfig(
        DpParams(**kwargs),
        fields.get("synth", "records"),
        int(fields.get("iters", 100)),
        structure,
        int(fields.get("cells", DEFAULT_MAX_MODEL_CELLS)),
    )


@dataclass(frozen=True)
class SdsRelease:
    """DP aggregates of one configuration and their privacy report."""

    aggregates: AggregateSet
    report: PrivacyReport


def aggregate(table: PreparedTable, params: DpParams, seed: int) -> SdsRelease:
    """The engine's stages (count, plan, lengths 1..R, finalize) with the seed's key."""
    rnd = ReleaseRandomness.from_seed(seed)
    count = protect_record_count(table, params, rnd, release_label=LABEL)
    return aggregate_after_count(table, params, seed, count)


def aggregate_after_count(table: PreparedTable, params: DpParams, seed: int, count) -> SdsRelease:
    """Lengths 1..R and finalize after a given record-count step."""
    rnd = ReleaseRandomness.from_seed(seed)
    plan = plan_release(params, count.protected_number_of_records)
    survivors: dict[int, CombinationCounts] = {}
    steps = []
    for k in range(1, params.reporting_length + 1):
        step = aggregate_length(table, k, survivors, plan, params, rnd, release_label=LABEL)
        survivors[k] = step.survivors
        steps.append(step)
    aggregates = finalize(
        survivors,
        domain=table.domain,
        reporting_length=params.reporting_length,
        protected_number_of_records=count.protected_number_of_records,
    )
    parts = release_delta_parts(params, plan, table.domain.n_columns)
    return SdsRelease(aggregates, privacy_report(plan, count, steps, parts))


def count_scale(release: SdsRelease) -> float:
    """The discrete Laplace scale 1/ε_N of the release's record count (its published scale)."""
    eps = next(s.epsilon for s in release.report.spends if s.stage == "count")
    return 1.0 / eps


def release_noise(release: SdsRelease) -> AggregateNoise:
    """The published noise of a release's aggregates, as a release's manifest describes it."""
    rep = release.report
    return AggregateNoise.from_release(
        rep.sigma_by_len,
        rep.allowed_sensitivity_by_len,
        rep.threshold_by_len,
        count_scale=count_scale(release),
    )


def synthesize_release(
    release: SdsRelease,
    synthesis: str,
    seed: int,
    iterations: int = 100,
    structure: str = "g-statistic",
    max_model_cells: int = DEFAULT_MAX_MODEL_CELLS,
) -> PreparedTable:
    """Records (optionally 1-way reconciled) or the consistent model's sample, N̂ records."""
    aggregates, rep = release.aggregates, release.report
    n = int(aggregates.protected_number_of_records or 0)
    rng = np.random.default_rng(seed)
    if synthesis in ("records", "records+1way"):
        if synthesis == "records+1way":  # as a release: the total the 1-way counts say
            noise = release_noise(release)
            n = max(round(estimated_total(aggregates, noise)), 1)
        params = SynthesisParams(
            target_number_of_records=n, reconcile_one_way=synthesis == "records+1way"
        )
        # matched to the aggregates within their published noise, as a release does
        sd = [
            s * math.sqrt(max(a, 0))
            for s, a in zip(rep.sigma_by_len, rep.allowed_sensitivity_by_len, strict=True)
        ]
        return synthesize(aggregates, params, rng=rng, noise_sd_by_len=sd)
    if synthesis == "model":
        noise = release_noise(release)
        params = ModelParams(
            iterations=iterations, structure=structure, max_model_cells=max_model_cells
        )
        model = fit_aggregates(aggregates, noise, params)
        _MODEL_CELLS[:] = [model.tree.cells]
        return records_of(model, aggregates, None, rng=rng)  # the model's total, as a release
    raise ValueError(f"unknown synthesis {synthesis!r}")


def length_agreement(release: SdsRelease, table: PreparedTable, k: int) -> float:
    """Share of released k-way combinations whose synthetic count is within ±1.96·σ_k√Δ_k of
    their DP count (the published 95% interval); nan when length k released nothing."""
    rep = release.report
    if k > len(rep.sigma_by_len):
        return float("nan")
    sd = rep.sigma_by_len[k - 1] * math.sqrt(max(rep.allowed_sensitivity_by_len[k - 1], 0))
    by_len = agreement(release.aggregates, table).by_len
    if k not in by_len:
        return float("nan")
    one = by_len[k]
    reported = one.reported
    if not reported.any():
        return float("nan")
    gap = np.abs(one.synthetic[reported] - one.dp[reported])
    return float(np.mean(gap <= Z_95 * sd))


def one_way_agreement(release: SdsRelease, table: PreparedTable) -> float:
    """Share of released 1-way values whose synthetic count is within ±1.96·σ_1√Δ_1 of DP's."""
    return length_agreement(release, table, 1)


# ------------------------------------------------------------------ the methods
def tvds(original: PreparedTable, table: PreparedTable) -> tuple[float, float, float]:
    t = marginal_fidelity(original, table, max_order=3)["tvd_mean_by_order"]
    return float(t[1]), float(t[2]), float(t[3])


def run_sds(ds: DataSet, seed: int, config: SdsConfig) -> dict[str, Any]:
    """One explicit SDS configuration: aggregates, synthesis, TVDs, agreement."""
    t0 = time.perf_counter()
    release = aggregate(ds.original, config.params, seed)
    t1 = time.perf_counter()
    table = synthesize_release(
        release,
        config.synthesis,
        seed,
        config.iterations,
        config.structure,
        config.max_model_cells,
    )
    return _scored(ds, release, table, t0, t1) | {
        "released": {k: len(c) for k, c in release.aggregates.by_len.items()},
        "allowed": list(release.report.allowed_sensitivity_by_len),
    }


def _scored(
    ds: DataSet, release: SdsRelease, table: PreparedTable, t0: float, t1: float
) -> dict[str, Any]:
    """TVDs, the 1-way agreement, the seconds of aggregation and synthesis (ending now)."""
    t2 = time.perf_counter()
    return {
        "tvd": tvds(ds.original, table),
        "agree1": one_way_agreement(release, table),
        "agree2": length_agreement(release, table, 2),
        "seconds": [round(t1 - t0, 2), round(t2 - t1, 2)],
        "model_cells": _MODEL_CELLS.pop() if _MODEL_CELLS else None,
        "n_hat": release.aggregates.protected_number_of_records,
    }


def run_plan(ds: DataSet, seed: int) -> tuple[str, Callable[[], dict[str, Any]]]:
    """The planned default: the record count, then the plan from N̂ and public facts."""
    import sds_core.marginals.plan as plan_module
    from sds_core.marginals.plan import plan_sds

    base = DpParams(epsilon=ds.epsilon, delta=DELTA)
    count = protect_record_count(
        ds.original, base, ReleaseRandomness.from_seed(seed), release_label=LABEL
    )
    d, shared = ds.original.domain.n_columns, plan_module.length_one_share
    if COLUMN_EXPONENT[0]:  # issue 39's column rule (an experiment)
        plan_module.length_one_share = lambda signal: _column_share(  # type: ignore[assignment]
            signal, d, COLUMN_EXPONENT[0], shared
        )
    try:
        plan = plan_sds(
            count.protected_number_of_records,
            epsilon=ds.epsilon,
            delta=DELTA,
            n_columns=d,
        )
    finally:
        plan_module.length_one_share = shared
    config = SdsConfig(
        plan.dp_params(base),
        plan.synthesis,
        plan.model_iterations,
        plan.model_structure,
        plan.max_model_cells,
    )

    def go() -> dict[str, Any]:
        t0 = time.perf_counter()
        release = aggregate_after_count(ds.original, config.params, seed, count)
        final = plan.after_aggregation(release.aggregates)  # records or the model above R = 2
        t1 = time.perf_counter()
        synthesis = final.synthesis
        if synthesis == "records" and final.reconcile_one_way:
            synthesis = "records+1way"  # as a release: records adjusted to the 1-way counts
        table = synthesize_release(
            release,
            synthesis,
            seed,
            config.iterations,
            config.structure,
            config.max_model_cells,
        )
        return _scored(ds, release, table, t0, t1) | {
            "synthesis": synthesis,
            "plan": final.reason,
        }

    after = "" if plan.reporting_length < 3 else ",after=excess"  # synthesis chosen after
    return f"plan{PLAN_TAG}[{config.key()}{after}]", go


def run_registry(ds: DataSet, seed: int, name: str) -> dict[str, Any]:
    """``mst`` or ``aim`` at the same (ε, δ) and key."""
    synth = create(name)
    t0 = time.perf_counter()
    synth.fit(
        ds.original,
        epsilon=ds.epsilon,
        delta=DELTA,
        rnd=ReleaseRandomness.from_seed(seed),
        release_label=LABEL,
    )
    t1 = time.perf_counter()
    table = synth.sample(None, rng=np.random.default_rng(seed))
    t2 = time.perf_counter()
    return {
        "tvd": tvds(ds.original, table),
        "seconds": [round(t1 - t0, 2), round(t2 - t1, 2)],
    }


def run_pacsynth(ds: DataSet, seed: int) -> dict[str, Any]:
    """pac-synth 0.0.8 (SDS's reference): R = 3, the same (ε, δ), its default split, records.

    Its ``fit`` makes the DP aggregates (its own unseeded noise); the records are then drawn by
    our reference mode (``REFERENCE_PARAMS``: pac-synth's sampling, which it reproduces to the
    third decimal, docs/synthesis.md), because pac-synth's own ``sample`` takes minutes from
    ~15k records on (100 s for yrbss's 13,583). ``PACSYNTH_SAMPLE=1`` uses its own sample.
    """
    import pacsynth

    params = (
        pacsynth.DpAggregateSeededParametersBuilder()
        .reporting_length(3)
        .epsilon(ds.epsilon)
        .delta(DELTA)
        .build()
    )
    synth = pacsynth.DpAggregateSeededSynthesizer(params)
    t0 = time.perf_counter()
    synth.fit(pacsynth.Dataset.from_data_frame(ds.frame))
    t1 = time.perf_counter()
    n = synth.get_dp_number_of_records()
    if os.environ.get("PACSYNTH_SAMPLE") == "1":
        table = prepare(synth.sample(n))
    else:
        texts = synth.get_dp_aggregates(";")
        domain = domain_from_text_keys(texts, columns=list(ds.frame.columns))
        aggregates = AggregateSet.from_text_dict(
            domain, texts, 3, protected_number_of_records=n, is_dp=True
        )
        reference = dataclasses.replace(REFERENCE_PARAMS, target_number_of_records=n)
        table = synthesize(aggregates, reference, rng=np.random.default_rng(seed))
    t2 = time.perf_counter()
    # its empty cells and its values, in the original's domain (a value it never drew is absent)
    table = _in_domain(table, ds.original)
    return {"tvd": tvds(ds.original, table), "seconds": [round(t1 - t0, 2), round(t2 - t1, 2)]}


def _in_domain(table: PreparedTable, original: PreparedTable) -> PreparedTable:
    """``table`` re-coded into ``original``'s domain (columns by name, labels by text)."""
    dom, mine = original.domain, table.domain
    codes = np.full((table.n_records, dom.n_columns), -1, dtype=original.codes.dtype)
    for j, col in enumerate(dom.columns):
        if col not in mine.columns:
            continue
        src = mine.column_index(col)
        index = {label: i for i, label in enumerate(dom.labels[j])}
        lut = np.array([index.get(lab, -1) for lab in mine.labels[src]] + [-1], dtype=np.int64)
        codes[:, j] = lut[table.codes[:, src]]
    return PreparedTable(dom, codes)


def run_independent(ds: DataSet, seed: int) -> dict[str, Any]:
    """Each column drawn from today's default DP 1-counts."""
    release = aggregate(ds.original, DpParams(epsilon=ds.epsilon, delta=DELTA), seed)
    n = int(release.aggregates.protected_number_of_records or 0)
    table = independent(release.aggregates, n, np.random.default_rng(seed))
    return {"tvd": tvds(ds.original, table), "agree1": one_way_agreement(release, table)}


def method_runner(method: str, ds: DataSet, seed: int) -> tuple[str, Callable[[], dict[str, Any]]]:
    """The cache key of ``method`` on this set and a thunk computing its result."""
    if method == "default":
        config = SdsConfig(DpParams(epsilon=ds.epsilon, delta=DELTA))
        return "default", lambda: run_sds(ds, seed, config)
    if method == "plan":
        return run_plan(ds, seed)
    if method in ("aim", "mst"):
        return method, lambda: run_registry(ds, seed, method)
    if method == "independent":
        return method, lambda: run_independent(ds, seed)
    if method == "pac-synth":
        own = os.environ.get("PACSYNTH_SAMPLE") == "1"
        return method + (":own-sample" if own else ""), lambda: run_pacsynth(ds, seed)
    if method.startswith("sds:"):
        config = parse_config(method, ds.epsilon)
        return config.key(), lambda: run_sds(ds, seed, config)
    raise SystemExit(f"unknown method {method!r}")


# ------------------------------------------------------------------ cache and tables
def read_cache() -> dict[tuple[str, int, str], dict[str, Any]]:
    out: dict[tuple[str, int, str], dict[str, Any]] = {}
    if CACHE.exists():
        for line in CACHE.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            # a plan's tag only named the code that ran: its configuration is the key
            out[(row["set"], row["seed"], re.sub(r"^plan:[^[]*\[", "plan[", row["method"]))] = row
    return out


def append_cache(row: dict[str, Any]) -> None:
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with CACHE.open("a") as f:
        f.write(json.dumps(row) + "\n")


def mean_sd(values: list[float]) -> str:
    a = np.asarray(values, dtype=float)
    if a.size == 1:
        return f"{a[0]:.4f}"
    return f"{a.mean():.4f} ± {a.std(ddof=1):.4f}"


def print_set(name: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    eps = name.split("@")[1] if "@" in name else name.rsplit("-", 1)[1]
    print(f"\n### {name} (ε = {eps}, δ = {DELTA:g})\n")
    print(
        "| method | seeds | TVD1 | TVD2 | TVD3 | 1-way agreement | 2-way agreement | "
        "seconds (DP + synthesis) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for method, results in rows.items():
        tv = np.array([r["tvd"] for r in results])
        agree = [r["agree1"] for r in results if "agree1" in r]
        agree2 = [r["agree2"] for r in results if "agree2" in r]
        secs = [sum(r["seconds"]) for r in results if "seconds" in r]
        print(
            f"| {method} | {len(results)} | {mean_sd(list(tv[:, 0]))} | "
            f"{mean_sd(list(tv[:, 1]))} | {mean_sd(list(tv[:, 2]))} | "
            f"{f'{np.mean(agree):.3f}' if agree else '-'} | "
            f"{f'{np.mean(agree2):.3f}' if agree2 else '-'} | "
            f"{f'{np.mean(secs):.1f}' if secs else '-'} |"
        )


def print_targets(table: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    """planned vs aim and today's default, per set (means over seeds)."""
    print("\n### Targets (means over seeds)\n")
    print(
        "| set | default TVD2 | plan TVD2 | aim TVD2 | plan/aim | plan TVD1 | aim TVD1 | "
        "plan agreement 1-way | 2-way | TVD2 <= 1.15 aim | <= default | TVD1 ok |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, rows in table.items():
        plan = rows.get("plan")
        if plan is None or "aim" not in rows or "default" not in rows:
            continue

        def m(results: list[dict[str, Any]], i: int) -> float:
            return float(np.mean([r["tvd"][i] for r in results]))

        p1, p2 = m(plan, 0), m(plan, 1)
        a1, a2, d2 = m(rows["aim"], 0), m(rows["aim"], 1), m(rows["default"], 1)
        agree = np.mean([r["agree1"] for r in plan])
        agree2 = [r["agree2"] for r in plan if "agree2" in r]
        print(
            f"| {name} | {d2:.4f} | {p2:.4f} | {a2:.4f} | {p2 / a2:.2f} | {p1:.4f} | {a1:.4f} | "
            f"{agree:.3f} | {f'{np.mean(agree2):.3f}' if agree2 else '-'} | "
            f"{'yes' if p2 <= 1.15 * a2 else 'NO'} | "
            f"{'yes' if p2 <= d2 else 'NO'} | {'yes' if p1 <= max(2 * a1, 0.01) else 'NO'} |"
        )


COLUMN_EXPONENT = [0.0]
"""Issue 39's column rule (tried, not adopted): the plan's length-1 share with its odds scaled by
((11 − 1)/(d − 1))^x for d columns, x = this (0: the plan as it is); ``--share-exponent``."""
COLUMN_RULE = 2.0  # the exponent chosen on the fit sets (tv16), shown as the table's column


def _column_share(
    signal: float, n_columns: int, exponent: float, curve_of: Callable[[float], float]
) -> float:
    """The plan's length-1 share (``curve_of``) with the column rule: its odds scaled."""
    from sds_core.marginals.plan import MAX_LENGTH_1_SHARE

    curve = curve_of(signal)
    factor = (10 / max(n_columns - 1, 1)) ** exponent
    if factor == 1.0:
        return curve
    odds = curve / (1 - curve) * factor
    return min(MAX_LENGTH_1_SHARE, odds / (1 + odds))


def _plan_variant(ds: DataSet, seed: int, exponent: float) -> str:
    """The cache key of the plan's choice with the column rule at ``exponent``."""
    saved = COLUMN_EXPONENT[0]
    COLUMN_EXPONENT[0] = exponent
    try:
        key = run_plan(ds, seed)[0]
    finally:
        COLUMN_EXPONENT[0] = saved
    return re.sub(r"^plan:[^[]*\[", "plan[", key)


def print_suite(table: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    """Issue 39's cells: TVD2 (mean over seeds) and seconds of each method, the default's ratios.

    ``default`` is the plan as a release makes it; ``column rule`` the plan with issue 39's
    column rule (tried, not adopted; the same as the default where it left the share unchanged).
    """
    print("\n### The default against aim, mst and pac-synth (TVD2, mean of the seeds; seconds)\n")
    print(
        "| set | ε | seeds | default | column rule | aim | mst | pac-synth | "
        "default / best(aim, mst) | ≤ 1.10× | ≤ pac-synth | below aim | "
        "seconds default / aim / mst / pac-synth |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def tvd2(results: list[dict[str, Any]]) -> float:
        return float(np.mean([r["tvd"][1] for r in results])) if results else math.nan

    def secs(results: list[dict[str, Any]]) -> str:
        return f"{np.mean([sum(r['seconds']) for r in results]):.1f}" if results else "-"

    def yes(ok: bool, *values: float) -> str:
        return "-" if any(math.isnan(v) for v in values) else ("yes" if ok else "**no**")

    for name, rows in table.items():
        plan = rows.get("plan", [])
        d, a, m = tvd2(plan), tvd2(rows.get("aim", [])), tvd2(rows.get("mst", []))
        p, before = tvd2(rows.get("pac-synth", [])), tvd2(rows.get("plan-columns", []))
        best = float(np.nanmin([a, m])) if not (math.isnan(a) and math.isnan(m)) else math.nan
        set_name, eps = name.split("@")
        times = " / ".join(secs(rows.get(k, [])) for k in ("plan", "aim", "mst", "pac-synth"))
        print(
            f"| {set_name} | {eps} | {len(plan)} | {d:.4f} | {before:.4f} | {a:.4f} | {m:.4f} | "
            f"{p:.4f} | {d / best:.2f} | {yes(d <= 1.10 * best, d, best)} | "
            f"{yes(d <= p, d, p)} | {yes(d < a, d, a)} | {times} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(ALL_SETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
    parser.add_argument("--fresh", action="store_true", help="recompute cached results")
    parser.add_argument("--cached-only", action="store_true", help="print the cache, run nothing")
    parser.add_argument("--suite", action="store_true", help="issue 39's public sets")
    parser.add_argument("--plan-tag", default="", help="cache the plan's rows under this tag")
    parser.add_argument(
        "--share-exponent",
        type=float,
        help="run the plan with the column rule tried in issue 39 (0: the plan as it is)",
    )
    args = parser.parse_args()
    if args.share_exponent is not None:
        COLUMN_EXPONENT[0] = args.share_exponent
    global PLAN_TAG
    PLAN_TAG = f":{args.plan_tag}" if args.plan_tag else ""
    if args.suite:
        global CACHE
        CACHE = SUITE_CACHE
        if args.sets == list(ALL_SETS):
            args.sets = [f"{n}@{e:g}" for e in EPSILONS for n in SUITE]
        if args.methods == list(DEFAULT_METHODS):
            args.methods = list(SUITE_METHODS)
        absent = [s for s in args.sets if not available(s.split("@")[0])]
        for s in absent:
            print(f"skipped {s}: {SUITE[s.split('@')[0]].needs} is not in this clone", flush=True)
        args.sets = [s for s in args.sets if s not in absent]
    suite_name = re.compile(rf"({'|'.join(map(re.escape, SUITE))})@\d+(\.\d+)?")
    unknown = sorted(
        s
        for s in set(args.sets) - set(ALL_SETS)
        if not SET_NAME.fullmatch(s) and not suite_name.fullmatch(s)
    )
    if unknown:
        raise SystemExit(
            f"unknown sets {unknown}; choose from {list(ALL_SETS)} or any SIZE-raw|binned-EPS "
            f"with SIZE in {list(SIZES)}"
        )
    cache = read_cache()
    table: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name in args.sets:
        rows: dict[str, list[dict[str, Any]]] = {}
        for seed in args.seeds:
            ds: DataSet | None = None
            for method in args.methods:
                if ds is None:
                    ds = data_set(name, seed)
                key, thunk = method_runner(method, ds, seed)
                key = re.sub(r"^plan:[^[]*\[", "plan[", key)
                if args.suite and method == "plan":  # the column rule's row, when measured
                    tried = _plan_variant(ds, seed, COLUMN_RULE)
                    if (name, seed, tried) in cache:
                        rows.setdefault("plan-columns", []).append(cache[(name, seed, tried)])
                hit = cache.get((name, seed, key))
                if hit is None or args.fresh:
                    if args.cached_only:
                        continue
                    start_load = load()
                    hit = {"set": name, "seed": seed, "method": key, **thunk()}
                    hit["load"] = f"{start_load}-{load()}"
                    append_cache(hit)
                    cache[(name, seed, key)] = hit
                    print(
                        f"  {name} seed {seed} {key}: TVD {hit['tvd'][0]:.4f} "
                        f"{hit['tvd'][1]:.4f} {hit['tvd'][2]:.4f} "
                        f"agree {hit.get('agree1', float('nan')):.3f} "
                        f"s {hit.get('seconds')} cells {hit.get('model_cells')} "
                        f"load {hit['load']}",
                        file=sys.stderr,
                        flush=True,
                    )
                label = method if method in ("plan", "pac-synth") else key
                rows.setdefault(label, []).append(hit)
        table[name] = rows
        print_set(name, rows)
    if args.suite:
        print_suite(table)
    else:
        print_targets(table)


if __name__ == "__main__":
    main()
