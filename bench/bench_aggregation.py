"""The aggregation stages at their floor: count + aggregate-1..R, cold and warm, vs pac-synth's fit.

Issue #28 point 1 measured a 32k-row, 15-column census table we do not have (UCI Adult's
shape). This script builds a comparable one from ``PUMS_ca_10k.csv`` (11 columns), resampled
with replacement to 32,000 rows (seed 20260128), with 4 derived census columns, 15 in all:

* ``age_band``: age in the bands 0-17, 18-24, 25-34, 35-44, 45-54, 55-64, 65-74, 75+;
* ``educ_level``: educ 1-8 "no-hs", 9 "hs", 10-12 "some-college", 13 "ba", 14-16 "graduate";
* ``race``: the latino / black / asian flags joined ("1-0-0"; 8 values possible);
* ``sex_married``: sex and married joined ("1-0"; 4 values).

``--table census`` (default) also publishes two columns the way census tables do: ``puma`` as
its 2-digit region (9 values, not 233) and ``income`` in $5,000 bands clipped to -10k..200k
(41 values, not 1,584), so that, like Adult, most high-cardinality detail falls below the
thresholds (pac-synth's fit is then ~3x faster than on ``--table raw``, which keeps both raw).

Every measurement runs in a fresh interpreter (``--child``):

* ``pacsynth``: ``Dataset.from_data_frame`` + ``fit`` (as ``bench_vs_pacsynth.py``), R, ε;
* ``ours``: imports what the home's release runner imports before it forks a release
  (``--imports runner``: ``sds_release.flows.local.runner.warm_up``'s list) or only the core
  (``core``), prepares the table (the ``prepare`` stage) and plans the budget (the ``budget``
  stage), untimed; then times ``protect_record_count`` and ``aggregate_length`` for k = 1..R as
  ``sds_release/tasks/marginals.py`` calls them. That first pass is *cold*: one release per process,
  as the runner's forked child runs it. With ``--preload`` the process first calls
  :func:`sds_core.marginals.warmup.load_kernels`, as a runner that preloads the kernels
  before it forks would (*preloaded*). Then the stages run ``--warm`` more times (median);
* ``exact``: exact counts of every combination of length <= R (``exact_aggregates``), warm.

Prints each time, the load average, and the targets' ratios: pac-synth fit / (count +
aggregate), and each length's time over the next length's.

    .venv/bin/python bench/bench_aggregation.py                  # census table, R=3, ε=4, 3 rounds
    .venv/bin/python bench/bench_aggregation.py --table raw --rounds 1
    .venv/bin/python bench/bench_aggregation.py --child ours --profile prof.html   # pyinstrument
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
SOURCES = [
    PROJECT.parent / "shared/data/pums/PUMS_ca_10k.csv",
    PROJECT / "examples/pums_ca_10k.csv",
]
ROWS = 32_000
DATA_SEED = 20260128
RELEASE_SEED = 20260129


def census_table(table: str = "census", rows: int = ROWS, seed: int = DATA_SEED) -> Any:
    """The 15-column table ``census`` or ``raw`` (see the module docstring), text, deterministic."""
    import numpy as np
    import pandas as pd

    src = next(p for p in SOURCES if p.exists())
    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    df = df.sample(n=rows, replace=True, random_state=seed).reset_index(drop=True)
    age = pd.to_numeric(df["age"], errors="coerce").fillna(-1).astype(int)
    edges = [0, 18, 25, 35, 45, 55, 65, 75, 1000]
    labels = ["0-17", "18-24", "25-34", "35-44", "45-54", "55-64", "65-74", "75+"]
    band = pd.cut(age, bins=edges, right=False, labels=labels)
    df["age_band"] = band.astype(str).where(band.notna(), "")
    educ = pd.to_numeric(df["educ"], errors="coerce").fillna(-1).astype(int)
    level = np.select(
        [educ <= 0, educ <= 8, educ == 9, educ <= 12, educ == 13],
        ["", "no-hs", "hs", "some-college", "ba"],
        "graduate",
    )
    df["educ_level"] = level
    df["race"] = df["latino"] + "-" + df["black"] + "-" + df["asian"]
    df["sex_married"] = df["sex"] + "-" + df["married"]
    if table == "census":
        df["puma"] = df["puma"].str[:2]
        income = pd.to_numeric(df["income"], errors="coerce").clip(-10_000, 200_000)
        df["income"] = (income // 5000 * 5).astype(int).astype(str) + "k"
    return df


def loadavg() -> str:
    """The 1-, 5- and 15-minute load averages (the machine is shared)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------- children
def run_pacsynth(table: str, reporting_length: int, epsilon: float) -> dict[str, Any]:
    """pac-synth ``Dataset.from_data_frame`` + ``fit`` on the table."""
    import pacsynth

    df = census_table(table)
    t0 = time.perf_counter()
    ds = pacsynth.Dataset.from_data_frame(df)
    params = (
        pacsynth.DpAggregateSeededParametersBuilder()
        .reporting_length(reporting_length)
        .epsilon(epsilon)
        .build()
    )
    pacsynth.DpAggregateSeededSynthesizer(params).fit(ds)
    return {"fit_s": time.perf_counter() - t0}


def _release_imports(imports: str) -> None:
    """``runner``: what the home's release runner imports before it forks a release (the list
    of ``sds_release.flows.local.runner.warm_up``, Prefect and GX included); ``core``: only the core
    modules the tasks load (a bare process)."""
    if imports == "runner":
        import fastapi.encoders  # noqa: F401
        import great_expectations.expectations  # noqa: F401
        import rich.console  # noqa: F401
        from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: F401

        import sds_release.flows.release
        import sds_release.store.run.progress  # noqa: F401
        from sds_release.flows import cli  # noqa: F401
        from sds_release.store.inputs import gx_suite  # noqa: F401
    import numba  # noqa: F401

    import sds_core.data.preparation
    import sds_core.marginals.engine
    import sds_core.synthesis.generator  # noqa: F401


def _stages(table: Any, reporting_length: int, epsilon: float, seed: int) -> dict[str, float]:
    """count and aggregate-1..R as ``sds_release/tasks/marginals.py`` calls them; seconds per
    stage."""
    from sds_core.dp.randomness import ReleaseRandomness
    from sds_core.marginals import engine
    from sds_core.marginals.params import DpParams, release_delta

    # δ explicit, as a release passes it (release_delta of the schema's max_rows; no schema)
    dp = DpParams(epsilon=epsilon, reporting_length=reporting_length, delta=release_delta(None))
    rnd = ReleaseRandomness.from_seed(seed)
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    count = engine.protect_record_count(table, dp, rnd, release_label="bench")
    out["count"] = time.perf_counter() - t0
    shorter: dict[int, Any] = {}
    for k in range(1, reporting_length + 1):
        t0 = time.perf_counter()
        step = engine.aggregate_length(
            table,
            k,
            shorter,
            engine.plan_release(dp, count.protected_number_of_records),
            dp,
            rnd,
            release_label="bench",
        )
        shorter[k] = step.survivors
        out[f"aggregate-{k}"] = time.perf_counter() - t0
    return out


def run_ours(
    table_name: str,
    reporting_length: int,
    epsilon: float,
    *,
    warm: int,
    imports: str,
    preload: bool,
    profile: str | None,
) -> dict[str, Any]:
    """Cold pass (first in this process), then ``warm`` more; seconds per stage."""
    t0 = time.perf_counter()
    _release_imports(imports)
    import_s = time.perf_counter() - t0
    preload_s = 0.0
    if preload:
        from sds_core.marginals.warmup import load_kernels

        t0 = time.perf_counter()
        load_kernels()
        preload_s = time.perf_counter() - t0
    from sds_core.data.preparation import PrepareParams, prepare
    from sds_core.marginals import engine
    from sds_core.marginals.params import DpParams, release_delta

    table = prepare(census_table(table_name), PrepareParams())  # the prepare stage
    # the budget stage plans the release in the same process before any data stage
    engine.plan_release(
        DpParams(epsilon=epsilon, reporting_length=reporting_length, delta=release_delta(None)), 1
    )
    if profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        profiler.start()
        cold = _stages(table, reporting_length, epsilon, RELEASE_SEED)
        profiler.stop()
        Path(profile).write_text(profiler.output_html())
        print(profiler.output_text(unicode=False, color=False, show_all=False), file=sys.stderr)
    else:
        cold = _stages(table, reporting_length, epsilon, RELEASE_SEED)
    runs = [_stages(table, reporting_length, epsilon, RELEASE_SEED + i) for i in range(warm)]
    warm_s = {name: statistics.median(r[name] for r in runs) for name in cold} if runs else {}
    return {
        "import_s": import_s,
        "preload_s": preload_s,
        "cold": cold,
        "warm": warm_s,
        "columns": table.domain.n_columns,
        "rows": table.n_records,
    }


def run_exact(table_name: str, reporting_length: int) -> dict[str, Any]:
    """Exact counts of every combination of length <= R (second call: warm)."""
    from sds_core.data.preparation import PrepareParams, prepare
    from sds_core.marginals.exact_counts import exact_aggregates

    table = prepare(census_table(table_name), PrepareParams())
    exact_aggregates(table, reporting_length)
    t0 = time.perf_counter()
    agg = exact_aggregates(table, reporting_length)
    return {
        "exact_s": time.perf_counter() - t0,
        "combinations": [len(agg.counts_of(k)) for k in range(1, reporting_length + 1)],
    }


def _child(args: list[str]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(PROJECT))
    res = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env
    )
    if res.returncode != 0:
        tail = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else "failed"
        return {"error": tail}
    parsed: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return parsed


# ---------------------------------------------------------------- the report
def _median(runs: list[dict[str, Any]], key: str, names: list[str]) -> dict[str, float]:
    return {n: statistics.median(x[key][n] for x in runs) for n in names}


def main() -> None:
    """Run the children, print the table and ratios."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--table", choices=["census", "raw"], default="census")
    ap.add_argument("--reporting-length", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per variant (median)")
    ap.add_argument("--warm", type=int, default=3, help="warm repeats in each of our processes")
    ap.add_argument("--json", type=Path, help="also write every measurement here")
    ap.add_argument("--child", choices=["pacsynth", "ours", "exact"])
    ap.add_argument("--profile", help="with --child ours: pyinstrument HTML of the cold pass")
    ap.add_argument(
        "--imports",
        choices=["runner", "core"],
        default="runner",
        help="what our processes import before the stages (default: the release runner's)",
    )
    ap.add_argument("--preload", action="store_true", help="with --child ours: load_kernels()")
    a = ap.parse_args()
    r, eps = a.reporting_length, a.epsilon
    if a.child == "pacsynth":
        print(json.dumps(run_pacsynth(a.table, r, eps)))
        return
    if a.child == "ours":
        out = run_ours(
            a.table,
            r,
            eps,
            warm=a.warm,
            imports=a.imports,
            preload=a.preload,
            profile=a.profile,
        )
        print(json.dumps(out))
        return
    if a.child == "exact":
        print(json.dumps(run_exact(a.table, r)))
        return

    print(f"# table {a.table}: {ROWS:,} rows x 15 columns, R={r}, ε={eps}, {os.cpu_count()} cores")
    print(f"# load before: {loadavg()}")
    common = ["--table", a.table, "--reporting-length", str(r), "--epsilon", str(eps)]
    ours_args = [*common, "--warm", str(a.warm), "--imports", a.imports]
    pac: list[dict[str, Any]] = []
    ours: list[dict[str, Any]] = []
    pre: list[dict[str, Any]] = []
    for _ in range(a.rounds):  # interleaved: every variant sees the same load
        pac.append(_child(["pacsynth", *common]))
        ours.append(_child(["ours", *ours_args]))
        pre.append(_child(["ours", *ours_args, "--preload"]))
    exact = _child(["exact", *common])
    print(f"# load after:  {loadavg()}")
    record = {"pacsynth": pac, "ours": ours, "preloaded": pre, "exact": exact, "load": loadavg()}
    if a.json:
        a.json.write_text(json.dumps(record, indent=2))
    for side, runs in (("pac-synth", pac), ("ours", ours), ("ours preloaded", pre)):
        errors = [x["error"] for x in runs if "error" in x]
        if errors:
            print(f"{side}: FAILED: {errors[0]}")
            return
    fit = statistics.median(x["fit_s"] for x in pac)
    names = ["count", *(f"aggregate-{k}" for k in range(1, r + 1))]
    cold, warm = _median(ours, "cold", names), _median(ours, "warm", names)
    preloaded = _median(pre, "cold", names)
    print(f"\npac-synth fit {fit:.3f} s (median of {a.rounds} processes)")
    print(f"{'stage':18s} {'cold s':>8s} {'preloaded s':>12s} {'warm s':>8s}")
    for n in [*names, "count + aggregate"]:
        row = [
            sum(d.values()) if n.startswith("count +") else d[n] for d in (cold, preloaded, warm)
        ]
        print(f"{n:18s} {row[0]:8.3f} {row[1]:12.3f} {row[2]:8.3f}")
    imports = statistics.median(x["import_s"] for x in ours)
    load_s = statistics.median(x["preload_s"] for x in pre)
    print(f"(untimed: imports ({a.imports}) {imports:.2f} s; load_kernels() {load_s:.2f} s)")
    if "exact_s" in exact:
        print(
            f"exact counts, every combination <= {r}: {exact['exact_s']:.3f} s warm "
            f"({' / '.join(map(str, exact['combinations']))} combinations)"
        )
    print()
    for label, d in (("cold", cold), ("preloaded", preloaded), ("warm", warm)):
        lengths = " ".join(
            f"{d[f'aggregate-{k}'] / d[f'aggregate-{k + 1}']:.2f}" for k in range(1, r)
        )
        print(
            f"{label:10s} pac-synth fit / ours {fit / sum(d.values()):6.1f}x (target >= 10); "
            f"aggregate-k / aggregate-(k+1), k = 1..{r - 1}: {lengths} (target <= 2)"
        )


if __name__ == "__main__":
    main()
