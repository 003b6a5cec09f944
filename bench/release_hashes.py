"""Behaviour fingerprint of ``sds release``: canonical sha256 of everything a release writes.

Runs a fixed matrix of releases (fixed ``--seed`` and ``--release-id``, a fresh temporary
``--home`` and ``PREFECT_HOME`` each) through the ``sds`` CLI as a subprocess, then hashes:

* ``release/<file>``: every published artifact, byte for byte, except
  - ``manifest.json``: only its deterministic fields are hashed (``dataset``, ``release_id``,
    ``status``, ``input``, ``privacy``, ``artifacts`` except ``report.html``'s sha256, the
    ``parameters`` minus the ``home`` and ``input`` paths, and the stage names, statuses and
    artifact lists). Left out: ``created_at``, ``finished_at`` (older manifests), stage times,
    ``versions`` (library versions), ``ledger_head`` (a commitment to the hash of a ledger chain
    that includes timestamps) and the raw sha256 of ``report.html`` (it prints ``created_at``);
  - ``report.html``: hashed after replacing ISO timestamps and the temporary home and project
    paths (it prints ``created_at`` and the parameters, paths included) with placeholders, and
    without a "time per stage" figure (wall-clock seconds; older reports had one);
  - ``manifest.sig`` and ``signing-key.pub`` are left out: they are made with the fresh home's
    random signing key over a manifest holding timestamps (``sds verify`` checks them).
* ``private/<path>``: the private workspace.
  - ``*.pkl`` checkpoints are unpickled (with whatever code is on the path) and hashed in a
    canonical form: objects -> (class ``__name__`` only, fields sorted by name; fields starting
    with ``_`` are caches/derived values and skipped), numpy arrays -> (dtype, shape, sha256 of
    the bytes), dicts sorted by canonical key, lists and tuples alike, floats by ``repr``,
    pyarrow tables as Arrow IPC bytes. The pickle bytes themselves are not hashed: they name
    the modules of the classes, which a refactor may move.
  - ``state.json``: without each stage's ``at`` time and pickle ``sha256`` (module paths).
  - ``params.json``: without the ``home`` and ``input`` paths.
  - ``validation-*.json`` (Great Expectations results): without the random expectation ``id``.
  - ``custodian-report.html``: as ``report.html`` (timestamps and paths replaced, no "time per
    stage" figure).
  - ``timeline.json``: the stage names, statuses and artifact lists only (no times).
  - ``ledger-anchor.json``: the anchored row number only (its hash chains timestamps).
  - anything else (``seed.json``, ``release.key``) byte for byte.
* ``ledger``: the ledger rows in order (kind, dataset, release, stage, mechanism, ε, δ, ρ,
  detail), read with sqlite3; ``seq``, ``created_at``, ``flow_run_id`` and the chain hashes are
  left out.

Cases (PUMS example, first 3000 rows, ``examples/release.toml`` unless said otherwise):
``sds-r2/3/4`` (aggregate-seeded, R = 2, 3, 4, records: pinned, so the SDS plan chooses
nothing); ``sds-planned`` (R and the synthesis left to the SDS plan); ``histogram-1way``;
``histogram-nway`` and ``dirichlet-multinomial`` on 5 columns (one joint table over all 11
columns is too large);
``cathist`` and ``declared`` (aggregate-seeded on declared domains, a temporary TOML with an
extra value never in the data) on the 8 columns that declare ``values``; ``raw-no-config``
(no config: ``--dataset``, 4 columns, a budget set with ``sds budget set``); and
``resume-aggregate-2`` / ``resume-synthesize``: killed inside that stage (``SDS_TEST_KILL_AT``),
then ``sds resume``d. Their fingerprint must equal ``sds-r3`` (same seed and release id), which
this script asserts (against the baseline's ``sds-r3`` when ``--check`` runs them alone).

Not covered: subject ids (``sds_core.prepare`` supports them, but neither the CLI nor the TOML
config can set ``subject_id``), so no release can be made with one through a stable interface.

Usage, with the code under test importable (``PYTHONPATH=.``): ``python
bench/release_hashes.py --out FILE.json`` or ``--check FILE.json`` (prints every differing
(config, file), exit 1), plus ``--only NAME`` (repeatable) and ``--jobs N`` (default 2).
"""

from __future__ import annotations

import argparse
import enum
import hashlib
import json
import os
import pickle
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "pums_ca_10k.csv"
CONFIG = ROOT / "examples" / "release.toml"
RID = "bench"
SEED = 20240607
KILL_ENV = "SDS_TEST_KILL_AT"
SDS = [sys.executable, "-c", "from sds_release.flows.cli import app; app()"]
BASE = ("--config", str(CONFIG), "--record-limit", "3000")
SMALL = "sex,age,educ,married,inc_cat"
DECLARED = "state,sex,educ,latino,black,asian,married,inc_cat"
RECORDS = ("--synthesis", "records")  # pinned: the SDS plan chooses nothing (R set too)


@dataclass(frozen=True)
class Case:
    """One release: CLI options, an optional kill stage and the case it must equal."""

    args: tuple[str, ...]
    kill: str | None = None
    same_as: str | None = None
    declared_toml: bool = False
    budget: bool = False


CASES: dict[str, Case] = {
    "sds-r2": Case((*BASE, "--reporting-length", "2", *RECORDS)),
    "sds-r3": Case((*BASE, "--reporting-length", "3", *RECORDS)),
    "sds-r4": Case((*BASE, "--reporting-length", "4", *RECORDS)),
    "sds-planned": Case(BASE),  # the SDS plan chooses R, the split and the synthesis
    "histogram-1way": Case((*BASE, "--synthesizer", "histogram-1way")),
    "histogram-nway": Case((*BASE, "--synthesizer", "histogram-nway", "--use-columns", SMALL)),
    "dirichlet-multinomial": Case(
        (*BASE, "--synthesizer", "dirichlet-multinomial", "--use-columns", SMALL)
    ),
    "cathist": Case((*BASE, "--synthesizer", "cathist", "--use-columns", DECLARED)),
    "declared": Case(("--record-limit", "3000"), declared_toml=True),
    "raw-no-config": Case(
        (
            "--dataset",
            "raw",
            "--record-limit",
            "3000",
            "--use-columns",
            "sex,age,educ,married",
            "--reporting-length",
            "3",
            *RECORDS,
        ),
        budget=True,
    ),
    "resume-aggregate-2": Case(
        (*BASE, "--reporting-length", "3", *RECORDS), "aggregate-2", "sds-r3"
    ),
    "resume-synthesize": Case((*BASE, "--reporting-length", "3", *RECORDS), "synthesize", "sds-r3"),
}

STAGE_KEYS = ("name", "status", "artifacts")
"""What is hashed of a stage record (its times are wall-clock)."""
TIMING_RE = re.compile(r'<figure class="chart" id="fig-timing".*?</figure>', re.S)
TIME_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


def sha(data: bytes | str) -> str:
    """Hex sha256 of bytes or UTF-8 text."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def canon(obj: Any) -> Any:
    """A JSON-able canonical form of an unpickled object (see the module docstring)."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int):
        return ["int", str(obj)]
    if isinstance(obj, float):
        return ["float", repr(obj)]
    if isinstance(obj, bytes | bytearray | memoryview):
        return ["bytes", sha(bytes(obj))]
    mod = type(obj).__module__.split(".")[0]
    if mod == "numpy":
        import numpy as np

        if isinstance(obj, np.ndarray) and obj.dtype.hasobject:
            return ["ndarray", obj.dtype.str, list(obj.shape), canon(obj.tolist())]
        if isinstance(obj, np.ndarray):
            data = np.ascontiguousarray(obj).tobytes()
            return ["ndarray", obj.dtype.str, list(obj.shape), sha(data)]
        if isinstance(obj, np.generic):
            return ["np-scalar", obj.dtype.str, canon(obj.item())]
        return ["numpy", type(obj).__name__, str(obj)]
    if mod == "pandas":
        if not hasattr(obj, "iloc") and not hasattr(obj, "to_frame"):
            return ["pandas", type(obj).__name__, repr(obj)]  # Timestamp, Categorical, ...
        df = obj.to_frame() if hasattr(obj, "to_frame") else obj  # Series/Index -> DataFrame
        return [
            type(obj).__name__,
            [str(c) for c in df.columns],
            [str(t) for t in df.dtypes],
            canon(df.index.to_numpy()),
            [canon(df.iloc[:, i].to_numpy()) for i in range(df.shape[1])],
        ]
    if mod == "pyarrow":
        import pyarrow as pa

        if isinstance(obj, pa.Table | pa.RecordBatch):
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, obj.schema) as writer:
                writer.write(obj)
            return [type(obj).__name__, sha(sink.getvalue().to_pybytes())]
        return ["pyarrow", type(obj).__name__, str(obj)]  # arrays, schemas, scalars
    if isinstance(obj, dict):
        items = [(canon(k), canon(v)) for k, v in obj.items()]
        return ["dict", sorted(items, key=lambda kv: json.dumps(kv[0]))]
    if isinstance(obj, list | tuple):
        return ["seq", [canon(x) for x in obj]]
    if isinstance(obj, set | frozenset):
        return ["set", sorted((canon(x) for x in obj), key=json.dumps)]
    if isinstance(obj, enum.Enum):
        return ["enum", type(obj).__name__, canon(obj.value)]
    names = set(getattr(obj, "__dict__", {}))
    for klass in type(obj).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update([slots] if isinstance(slots, str) else slots)
    if not names:  # no attributes (datetime, Decimal, Path, ...): its repr is its value
        return ["value", type(obj).__name__, repr(obj)]
    return [
        "object",
        type(obj).__name__,
        {
            n: canon(getattr(obj, n))
            for n in sorted(names)
            if not n.startswith("_") and hasattr(obj, n)
        },
    ]


def canon_hash(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj``."""
    return sha(json.dumps(canon(obj), ensure_ascii=False, separators=(",", ":")))


def json_hash(obj: Any) -> str:
    """sha256 of plain JSON data, keys sorted."""
    return sha(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")))


def drop_keys(obj: Any, keys: set[str]) -> Any:
    """``obj`` without the dict entries named in ``keys``, at any depth."""
    if isinstance(obj, dict):
        return {k: drop_keys(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [drop_keys(v, keys) for v in obj]
    return obj


def manifest_view(m: dict[str, Any]) -> dict[str, Any]:
    """The deterministic fields of a manifest."""
    keep = ("dataset", "release_id", "status", "input", "privacy", "artifacts")
    view = {k: m.get(k) for k in keep}
    view["artifacts"] = {k: v for k, v in m["artifacts"].items() if k != "report.html"}
    view["parameters"] = {k: v for k, v in m["parameters"].items() if k not in ("home", "input")}
    view["stages"] = [{k: s.get(k) for k in STAGE_KEYS} for s in m.get("stages", [])]
    return view


def ledger_rows(path: Path) -> list[list[Any]]:
    """Ledger rows in sequence order, without times, run ids and chain hashes."""
    with sqlite3.connect(path) as con:
        return [
            list(r)
            for r in con.execute(
                "SELECT kind, dataset, release_id, stage, mechanism, epsilon, delta, rho, detail "
                "FROM ledger ORDER BY seq"
            )
        ]


def fingerprint(home: Path, tmp: Path) -> dict[str, str]:
    """{name: sha256} of one finished release under ``home``."""
    (rel,) = home.glob(f"releases/*/{RID}")
    out: dict[str, str] = {}
    for f in sorted(p for p in rel.iterdir() if p.is_file()):
        if f.name in ("manifest.sig", "signing-key.pub"):
            continue
        if f.name == "manifest.json":
            out["release/manifest.json"] = json_hash(manifest_view(json.loads(f.read_text())))
        elif f.name == "report.html":
            text = TIME_RE.sub("<TIME>", TIMING_RE.sub("<TIMING>", f.read_text()))
            out["release/report.html"] = sha(
                text.replace(str(tmp), "<TMP>").replace(str(ROOT), "<ROOT>")
            )
        else:
            out[f"release/{f.name}"] = sha(f.read_bytes())
    priv = home / "private" / RID
    for f in sorted(p for p in priv.rglob("*") if p.is_file()):
        name, key = f.name, "private/" + f.relative_to(priv).as_posix()
        if name.endswith(".pkl"):
            with f.open("rb") as fh:
                out[key] = canon_hash(pickle.load(fh))  # our own private checkpoint
        elif name == "state.json":
            st = json.loads(f.read_text())
            st["stages"] = {k: {"file": v["file"]} for k, v in st["stages"].items()}
            out[key] = json_hash(st)
        elif name == "params.json":
            out[key] = json_hash(drop_keys(json.loads(f.read_text()), {"home", "input"}))
        elif name == "custodian-report.html":  # prints created_at, paths and stage seconds
            text = TIME_RE.sub("<TIME>", TIMING_RE.sub("<TIMING>", f.read_text()))
            out[key] = sha(text.replace(str(tmp), "<TMP>").replace(str(ROOT), "<ROOT>"))
        elif name == "timeline.json":  # every stage's wall-clock times
            stages = json.loads(f.read_text())["stages"]
            out[key] = json_hash([{k: s.get(k) for k in STAGE_KEYS} for s in stages])
        elif name == "ledger-anchor.json":  # the row's hash chains timestamps
            out[key] = json_hash({"seq": json.loads(f.read_text())["seq"]})
        elif name.startswith("validation-") and name.endswith(".json"):
            out[key] = json_hash(drop_keys(json.loads(f.read_text()), {"id"}))
        else:
            out[key] = sha(f.read_bytes())
    out["ledger"] = json_hash(ledger_rows(home / "ledger.sqlite"))
    return out


def sds(args: list[str], env: dict[str, str], what: str, expect_ok: bool = True) -> None:
    """Run the ``sds`` CLI; raise with its stderr when the exit status is not as expected.

    It runs in its own session; a killed run leaves its Prefect server behind in that process
    group, which is killed afterwards (output goes to a file: the server would hold a pipe).
    """
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [*SDS, *args], env=env, stdout=log, stderr=log, cwd=ROOT, start_new_session=True
        )
        code = proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if (code == 0) != expect_ok:
            log.seek(0)
            raise RuntimeError(f"{what}: exit {code}\n{log.read()[-3000:]}")


def declared_toml(path: Path) -> Path:
    """A config whose every used column declares ``values`` (one value never in the data)."""
    text = CONFIG.read_text().replace('"above 150k"]', '"above 150k", "not-in-the-data"]')
    use = json.dumps(DECLARED.split(","))
    path.write_text(
        f"use_columns = {use}\n"
        + text.replace('dataset = "pums-ca-10k"', 'dataset = "pums-declared"')
    )
    return path


def run_case(name: str) -> tuple[dict[str, str], float]:
    """Run one case in fresh temporary homes; its fingerprint and wall time."""
    case, start = CASES[name], time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"sds-bench-{name}-") as t:
        tmp = Path(t)
        home = tmp / "home"
        env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect")}
        for var in ("PREFECT_API_URL", KILL_ENV, "SDS_HOME"):
            env.pop(var, None)
        args = [
            "release",
            str(DATA),
            "--home",
            str(home),
            "--seed",
            str(SEED),
            "--release-id",
            RID,
            "--quiet",
            *case.args,
        ]
        if case.declared_toml:
            args += ["--config", str(declared_toml(tmp / "declared.toml"))]
        if case.budget:
            sds(
                ["budget", "set", "raw", "--epsilon", "20", "--delta", "1e-4", "--home", str(home)],
                env,
                f"{name}: budget set",
            )
        if case.kill:
            sds(args, {**env, KILL_ENV: case.kill}, f"{name}: killed run", expect_ok=False)
            sds(["resume", RID, "--home", str(home), "--quiet"], env, f"{name}: resume")
        else:
            sds(args, env, name)
        return fingerprint(home, tmp), time.monotonic() - start


def differences(a: dict[str, dict[str, str]], b: dict[str, dict[str, str]]) -> list[str]:
    """Every (config, file) whose hash differs or exists on one side only."""
    out = []
    for cfg in sorted(set(a) | set(b)):
        fa, fb = a.get(cfg, {}), b.get(cfg, {})
        out += [
            f"{cfg}: {f}: {fa.get(f, '<missing>')} != {fb.get(f, '<missing>')}"
            for f in sorted(set(fa) | set(fb))
            if fa.get(f) != fb.get(f)
        ]
    return out


def main() -> int:
    """Parse the command line, run the matrix, write or check; the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write the fingerprints to this JSON file")
    ap.add_argument("--check", type=Path, help="compare with this JSON file")
    ap.add_argument("--only", choices=sorted(CASES), action="append", help="run only NAME")
    ap.add_argument("--jobs", type=int, default=2, help="cases run in parallel (default 2)")
    opts = ap.parse_args()
    if opts.out is None and opts.check is None:
        ap.error("give --out FILE, --check FILE, or both")
    names = opts.only or list(CASES)
    start = time.monotonic()
    result: dict[str, dict[str, str]] = {}
    failed = False
    with ThreadPoolExecutor(max(1, opts.jobs)) as pool:
        futures = {name: pool.submit(run_case, name) for name in names}
        for name, future in futures.items():
            try:
                result[name], secs = future.result()
                print(f"{name}: {secs:.1f} s", file=sys.stderr)
            except (RuntimeError, OSError, ValueError) as e:
                print(f"{name}: FAILED: {e}", file=sys.stderr)
                result[name], failed = {"<error>": str(e).splitlines()[0]}, True
    print(f"total wall time {time.monotonic() - start:.1f} s", file=sys.stderr)
    expected = json.loads(opts.check.read_text()) if opts.check else {}
    known = {**expected, **result}
    for name in names:
        ref = CASES[name].same_as
        if ref in known:
            diff = differences({name: known[ref]}, {name: result[name]})
            for line in diff:
                print(f"resume differs from {ref}: {line}", file=sys.stderr)
            failed |= bool(diff)
    if opts.out:
        opts.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    if opts.check is None:
        return int(failed)
    diff = differences({k: v for k, v in expected.items() if k in result}, result)
    for line in diff:
        print(line)
    print(f"{len(diff)} difference(s) in {len(result)} config(s)", file=sys.stderr)
    return int(failed or bool(diff))


if __name__ == "__main__":
    sys.exit(main())
