"""Benchmark: report.html and explorer.html of a large release, built and opened in Chromium.

Resamples the PUMS example to N rows (seed 0), runs the DP aggregation and aggregate-seeded
synthesis (not timed here; bench_synthesis.py does), then times what publishing adds for the
pages: the DP-vs-synthetic agreement (counting the synthetic records' combinations), report.html
and explorer.html; prints their sizes; then, when Chromium and Playwright are installed, opens
the explorer from disk and reports its load time and the time to filter for 1, 2 and 3 values.

    .venv/bin/python bench/bench_report.py                         # 1,000,000 rows, raw columns
    .venv/bin/python bench/bench_report.py --rows 100000 --no-browser
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.evaluation.agreement import agreement, agreement_summary
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.params import DpParams
from sds_core.synthesis.generator import SynthesisParams, default_target, synthesize
from sds_release.store.report.explorer import explorer_html
from sds_release.store.report.inputs import ReportInputs, sd_by_len
from sds_release.store.report.page import report_html

DATA = Path(__file__).resolve().parents[1] / "examples" / "pums_ca_10k.csv"
ZEROS = ("sex", "latino", "black", "asian", "married")


def release(rows: int, epsilon: float, drop: list[str]) -> tuple[Any, Any, Any]:
    """A DP release core of ``rows`` resampled records: (aggregates, synthetic, privacy)."""
    frame = pd.read_csv(DATA, dtype=str, keep_default_na=False).drop(columns=drop)
    frame = frame.sample(rows, replace=True, random_state=0).reset_index(drop=True)
    zeros = tuple(c for c in ZEROS if c in frame.columns)
    table = prepare(frame, PrepareParams(sensitive_zeros=zeros))
    rnd = ReleaseRandomness.from_seed(0)
    dp = dp_aggregate(table, DpParams(epsilon=epsilon, delta=1e-9, reporting_length=3), rnd)
    syn = synthesize(
        dp.aggregates,
        SynthesisParams(target_number_of_records=default_target(dp.aggregates)),
        rng=rnd.generator("bench/synthesis"),
    )
    return dp.aggregates, syn, dp.report


def manifest_of(aggregates: Any, privacy: Any) -> dict[str, Any]:
    """A manifest with the fields the pages read (privacy spend and noise, DP record count)."""
    report = privacy.to_dict()
    return {
        "release_id": "bench",
        "dataset": "pums-resampled",
        "created_at": "2026-11-23T00:00:00.000+00:00",
        "parameters": {"epsilon": privacy.epsilon, "reporting_length": 3},
        "privacy": {
            "epsilon": privacy.epsilon,
            "delta": privacy.delta,
            "stages": report["spends"],
            "noise": {
                "record_count": {"mechanism": "discrete-laplace", "scale": 1.0},
                "by_length": [
                    {
                        "length": k + 1,
                        "mechanism": "discrete-gaussian",
                        "sigma": s,
                        "allowed_sensitivity": a,
                        "threshold": t,
                    }
                    for k, (s, a, t) in enumerate(
                        zip(
                            report["sigma_by_len"],
                            report["allowed_sensitivity_by_len"],
                            report["threshold_by_len"],
                            strict=True,
                        )
                    )
                ],
            },
        },
        "input": {"rows": int(aggregates.protected_number_of_records)},
        "stages": [],
        "artifacts": {},
    }


def open_in_browser(path: Path) -> dict[str, Any]:
    """Explorer load time and filter times in headless Chromium (ms, measured by the page)."""
    from playwright.sync_api import sync_playwright

    meta = json.loads(path.read_text().split("id='meta'>", 1)[1].split("</script>", 1)[0])
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page()
        t = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=120_000)
        wall = (time.perf_counter() - t) * 1000
        out = {"load_ms_in_page": page.evaluate("window.explorer.loadMs"), "load_ms_wall": wall}
        first = page.locator("#top-rows tr").first
        for k in (1, 2, 3):  # drill down through the largest combination of each length
            t = time.perf_counter()
            first.click()
            page.wait_for_function(f"window.explorer.selection.length === {k}")
            out[f"filter_{k}_ms_in_page"] = page.evaluate("window.explorer.lastFilterMs")
            out[f"filter_{k}_ms_wall"] = (time.perf_counter() - t) * 1000
            if k < meta["reporting_length"]:
                first = page.locator("#top-rows tr").first
        browser.close()
    return out


def main() -> None:
    """Run the benchmark; print one JSON object (wall seconds, CPU seconds of this process)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--drop", default="", help="comma-separated columns to leave out")
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    t = time.perf_counter()
    aggregates, syn, privacy = release(
        args.rows, args.epsilon, [c for c in args.drop.split(",") if c]
    )
    core_s = time.perf_counter() - t
    t0, c0 = time.perf_counter(), time.process_time()
    manifest = manifest_of(aggregates, privacy)
    agree = agreement(aggregates, syn)
    published = agreement_summary(agree, sd_by_len(manifest))  # evaluation.json's metrics
    t1, c1 = time.perf_counter(), time.process_time()
    inputs = ReportInputs(manifest, published, agree, syn.n_records)
    report = report_html(inputs)
    t2, c2 = time.perf_counter(), time.process_time()
    explorer = explorer_html(inputs)
    t3, c3 = time.perf_counter(), time.process_time()
    out_dir = Path(tempfile.mkdtemp(prefix="sds-bench-report-"))
    (out_dir / "report.html").write_bytes(report)
    (out_dir / "explorer.html").write_bytes(explorer)
    result: dict[str, Any] = {
        "rows": args.rows,
        "synthetic_records": syn.n_records,
        "published_combinations": aggregates.total_combinations(),
        "combinations_in_explorer": sum(len(la) for la in agree.by_len.values()),
        "release_core_s": round(core_s, 1),
        "agreement_s": round(t1 - t0, 3),
        "report_s": round(t2 - t1, 3),
        "explorer_s": round(t3 - t2, 3),
        "pages_total_s": round(t3 - t0, 3),
        "cpu_s": {
            "agreement": round(c1 - c0, 3),
            "report": round(c2 - c1, 3),
            "explorer": round(c3 - c2, 3),
            "total": round(c3 - c0, 3),
        },
        "report_bytes": len(report),
        "explorer_bytes": len(explorer),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
        "files": str(out_dir),
    }
    if not args.no_browser and Path("/usr/bin/chromium").is_file():
        result["browser"] = open_in_browser(out_dir / "explorer.html")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
