"""Benchmark: our numpy junction-tree fit vs mbi 2.0 (Private-PGM, JAX) on the same measurements.

The driver (project venv) runs ``mst`` on PUMS, captures the junction tree and the noisy
measurements it fits, saves them, and fits them again in two fresh subprocesses: ours
(``sds_core.model``) and mbi's ``MirrorDescent`` (in a venv that has ``mbi>=2``, JAX x64). Both
sample records (ours: controlled rounding; mbi: ``synthetic_data``, its randomized rounding);
the driver reports fit seconds, peak RSS of each process, import time and TVD vs the data.

    .venv/bin/python bench/compare_mbi.py --mbi-python /tmp/mbi-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _export(path: Path, binned: bool, epsilon: float) -> object:
    """Run mst, save its tree + measurements to ``path``; return the prepared original."""
    import pandas as pd

    sys.path.insert(0, str(HERE))
    from bench_synthesis import DATA, bin_columns

    import sds_core.synthesizers.mst as mst_module
    from sds_core.data.preparation import prepare
    from sds_core.dp.randomness import ReleaseRandomness

    frame = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    if binned:
        frame = bin_columns(frame)
    original = prepare(frame)
    captured: dict[str, object] = {}
    real_fit = mst_module.fit_model

    def capture(tree, ms, total, **kw):  # type: ignore[no-untyped-def]
        captured.update(tree=tree, ms=ms, total=total)
        return real_fit(tree, ms, total, **kw)

    mst_module.fit_model = capture  # type: ignore[assignment]
    synth = mst_module.Mst()
    fit = synth.fit(
        original, epsilon=epsilon, delta=1e-6, rnd=ReleaseRandomness.from_seed(0), release_label="b"
    )
    tree, ms = captured["tree"], captured["ms"]
    arrays: dict[str, np.ndarray] = {
        "sizes": np.asarray(tree.sizes),  # type: ignore[attr-defined]
        "parents": np.asarray(tree.parents),  # type: ignore[attr-defined]
        "total": np.asarray(captured["total"]),
    }
    for j, clique in enumerate(tree.cliques):  # type: ignore[attr-defined]
        arrays[f"clique{j}"] = np.asarray(clique)
    for i, m in enumerate(ms):  # type: ignore[attr-defined]
        arrays[f"m{i}_cols"] = np.asarray(m.columns)
        arrays[f"m{i}_cells"] = m.cells
        arrays[f"m{i}_values"] = m.values
        arrays[f"m{i}_sigma"] = np.asarray(m.sigma)
    np.savez(path, **arrays)
    return original, fit.model.domain


def _load(path: Path) -> tuple[dict, list]:
    data = np.load(path)
    cliques = [tuple(int(c) for c in data[f"clique{j}"]) for j in range(len(data["parents"]))]
    ms = []
    i = 0
    while f"m{i}_cols" in data:
        ms.append(
            (
                tuple(int(c) for c in data[f"m{i}_cols"]),
                data[f"m{i}_cells"],
                data[f"m{i}_values"],
                float(data[f"m{i}_sigma"]),
            )
        )
        i += 1
    meta = {
        "sizes": tuple(int(s) for s in data["sizes"]),
        "parents": tuple(int(p) for p in data["parents"]),
        "cliques": cliques,
        "total": float(data["total"]),
    }
    return meta, ms


def _fit_ours(path: Path, out: Path, iterations: int) -> None:
    t0 = time.perf_counter()
    from sds_core.model.estimation import fit_model
    from sds_core.model.measurements import Measurement
    from sds_core.model.sampling import sample_records
    from sds_core.model.structure import JunctionTree

    t_import = time.perf_counter() - t0
    meta, raw = _load(path)
    tree = JunctionTree(meta["sizes"], tuple(meta["cliques"]), meta["parents"])
    ms = [Measurement(c, cells, v, s) for c, cells, v, s in raw]
    t0 = time.perf_counter()
    model = fit_model(tree, ms, meta["total"], iterations=iterations)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows = sample_records(model, round(meta["total"]), rng=np.random.default_rng(0))
    t_sample = time.perf_counter() - t0
    np.save(out, rows)
    print(json.dumps({"import": t_import, "fit": t_fit, "sample": t_sample}))


def _fit_mbi(path: Path, out: Path, iterations: int) -> None:
    t0 = time.perf_counter()
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    import mbi
    from mbi import estimation

    t_import = time.perf_counter() - t0
    meta, raw = _load(path)
    names = [f"c{i}" for i in range(len(meta["sizes"]))]
    domain = mbi.Domain(names, meta["sizes"])

    class Cells:
        """Query selecting some cells of the marginal's datavector."""

        def __init__(self, cells: np.ndarray) -> None:
            self.cells = np.asarray(cells)

        def __call__(self, f):  # type: ignore[no-untyped-def]
            return f.datavector()[self.cells]

        def op_norm_sq(self) -> float:
            return 1.0

    measurements = [
        mbi.LinearMeasurement(v, tuple(names[i] for i in c), s, query=Cells(cells))
        for c, cells, v, s in raw
    ]
    t0 = time.perf_counter()
    model = estimation.MirrorDescent().estimate(
        domain, measurements, known_total=meta["total"], iters=iterations
    )
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    data = model.synthetic_data(rows=round(meta["total"]))
    t_sample = time.perf_counter() - t0
    columns = data.to_dict()
    np.save(out, np.stack([np.asarray(columns[n]) for n in names], axis=1))
    print(json.dumps({"import": t_import, "fit": t_fit, "sample": t_sample}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mbi-python", default=None, help="python of a venv with mbi>=2")
    parser.add_argument("--binned", action="store_true")
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--iterations", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--role", choices=["driver", "ours", "mbi"], default="driver")
    parser.add_argument("--data", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.role == "ours":
        _fit_ours(args.data, args.out, args.iterations[0])
        return
    if args.role == "mbi":
        _fit_mbi(args.data, args.out, args.iterations[0])
        return
    from sds_core.data.table import PreparedTable
    from sds_core.evaluation.metrics import marginal_fidelity

    tmp = Path(tempfile.mkdtemp(prefix="mbi-compare-"))
    original, domain = _export(tmp / "m.npz", args.binned, args.epsilon)
    cards = np.asarray(domain.cardinalities)
    print(
        "| fitter | iterations | import s | fit s | sample s | peak RSS MiB | TVD1 | TVD2 | TVD3 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    runs = [("ours (numpy)", sys.executable, "ours")]
    if args.mbi_python:
        runs.append(("mbi 2.0 (JAX)", args.mbi_python, "mbi"))
    for name, python, role in runs:
        for iterations in args.iterations:
            out = tmp / f"{role}-{iterations}.npy"
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            res = subprocess.run(
                [
                    python,
                    __file__,
                    "--role",
                    role,
                    "--data",
                    str(tmp / "m.npz"),
                    "--out",
                    str(out),
                    "--iterations",
                    str(iterations),
                ],
                capture_output=True,
                text=True,
                check=True,
                env={"PYTHONPATH": str(HERE.parent), "PATH": "/usr/bin:/bin"},
            )
            rss = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
            t = json.loads(res.stdout.strip().splitlines()[-1])
            cats = np.load(out).astype(np.int64)
            codes = np.where(cats == cards[None, :], -1, cats).astype(np.int32)
            tvd = marginal_fidelity(original, PreparedTable(domain, codes), max_order=3)
            v = tvd["tvd_mean_by_order"]
            print(
                f"| {name} | {iterations} | {t['import']:.2f} | {t['fit']:.2f} | {t['sample']:.2f}"
                f" | {rss:.0f} | {v[1]:.4f} | {v[2]:.4f} | {v[3]:.4f} |",
                flush=True,
            )
    print(f"\nload average: {open('/proc/loadavg').read().split()[0]}")


if __name__ == "__main__":
    main()
