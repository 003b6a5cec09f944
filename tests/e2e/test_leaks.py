"""Canary values planted in the input never reach a published file, the console or Prefect.

Three canaries ride in an otherwise ordinary input: a unique string in one rare record, a unique
numeric value (in a binned column), and a unique subject id whose two rows are joined into one
record (``subject_id``). Each run is the real ``sds release`` in a subprocess, as a user runs it:
its own temporary Prefect server with the database, logs and result storage under
``$SDS_HOME/prefect``, logging to the Prefect API on at INFO. After a complete release, a release
whose bad cell (a fourth canary) the CLI's pre-flight refuses before the flow starts, and a
release SIGKILLed in ``aggregate-2`` then resumed, every byte under ``$SDS_HOME/releases`` and
``$SDS_HOME/prefect`` and every line printed is searched. The private workspace may hold raw
values (validation details), the Prefect database every run's parameters and logs: the modes of
everything under the home are checked too (folders 0700, files 0600).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from sds_release.store.workspace.integrity import forbidden_content_check
from tests.helpers import COLUMNS, EXAMPLE, PROJECT, TINY_CONFIG

CANARY_TEXT = "Zq7CanaryCity"
CANARY_NUMBER = 8675309
CANARY_SUBJECT = "CANARY-PID-5e1f"
CANARY_BAD = "CANARY-BAD-9x"
CANARIES = (CANARY_TEXT, str(CANARY_NUMBER), CANARY_SUBJECT, CANARY_BAD)

CONFIG = (
    TINY_CONFIG.replace(
        "reporting_length = 2\n", 'reporting_length = 2\nsubject_id = "pid"\n'
    ).replace(
        "sensitive_zeros =",
        'use_columns = ["sex", "age", "educ", "married", "inc_cat", "city", "income"]\n'
        "sensitive_zeros =",
    )
    + """
[[schema.columns]]
name = "city"

[[schema.columns]]
name = "income"
type = "integer"
min = 0
max = 10000000
bins = { width = 1000000, origin = 0 }

[[schema.columns]]
name = "pid"
nullable = false
"""
)


def _write_input(path: Path, *, bad_cell: bool = False) -> None:
    """400 ordinary rows plus the canary subject's two identical rows (and maybe a bad cell)."""
    with open(EXAMPLE, newline="") as f, open(path, "w", newline="") as out:
        reader, writer = csv.DictReader(f), csv.writer(out)
        writer.writerow([*COLUMNS, "city", "income", "pid"])
        for i, row in enumerate(reader):
            if i == 400:
                break
            city = ("north", "south", "east", "west")[i % 4]
            sex = CANARY_BAD if bad_cell and i == 17 else row["sex"]
            values = [sex, *(row[c] for c in COLUMNS[1:])]
            writer.writerow([*values, city, 20000 + 137 * i, f"p{i:04d}"])
        for _ in range(2):
            writer.writerow(["1", "44", "9", "1", "50k-60k", CANARY_TEXT, CANARY_NUMBER,
                             CANARY_SUBJECT])  # fmt: skip


def _sds(home: Path, *args: str, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != "SDS_HOME"}
    env.update(
        SDS_HOME=str(home),
        PREFECT_LOGGING_LEVEL="INFO",
        PREFECT_LOGGING_TO_API_ENABLED="true",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="300",
    )
    if kill_at:
        env["SDS_TEST_KILL_AT"] = kill_at
    # its own session, so that the temporary Prefect server a SIGKILLed run leaves behind
    # (holding the output pipes) can be stopped with the whole group
    proc = subprocess.Popen(
        [sys.executable, "-m", "sds_release.flows.cli", *args],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        if kill_at:
            proc.wait(timeout=900)
            with contextlib.suppress(ProcessLookupError):  # the orphaned temporary server
                os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _needles(text: str) -> list[bytes]:
    """Byte forms of a canary: UTF-8/UTF-16 text and, for a number, int64/float64 encodings."""
    out = [text.encode(), text.encode("utf-16-le")]
    if text.isdigit():
        n = int(text)
        out += [struct.pack("<q", n), struct.pack(">q", n), struct.pack("<d", float(n))]
    return out


def _found(data: bytes) -> list[str]:
    return [c for c in CANARIES if any(n in data for n in _needles(c))]


@pytest.mark.slow
def test_no_canary_leaks_and_private_modes(tmp_path: Path) -> None:
    """0 canaries found in releases/, the console, the Prefect DB, logs and result storage,
    after a complete, a refused (pre-flight) and a resumed release; every file under the home
    0600 (private/, the Prefect database, its logs, releases/), every directory 0700."""
    home, inputs = tmp_path / "home", tmp_path / "inputs"
    inputs.mkdir()
    config = tmp_path / "leak.toml"
    config.write_text(CONFIG)
    good, bad = inputs / "people.csv", inputs / "people-bad.csv"
    _write_input(good)
    _write_input(bad, bad_cell=True)
    base = ["--config", str(config), "--seed", "11", "--quiet"]
    runs = [_sds(home, "release", str(good), *base, "--release-id", "leak-ok")]
    assert runs[-1].returncode == 0, runs[-1].stderr.decode()[-3000:]
    runs.append(_sds(home, "release", str(bad), *base, "--release-id", "leak-bad"))
    assert runs[-1].returncode == 1 and b"validation failed" in runs[-1].stderr
    runs.append(
        _sds(home, "release", str(good), *base, "--release-id", "leak-rs", kill_at="aggregate-2")
    )
    assert runs[-1].returncode == -signal.SIGKILL
    runs.append(_sds(home, "resume", "leak-rs", "--quiet"))
    assert runs[-1].returncode == 0, runs[-1].stderr.decode()[-3000:]

    # the canaries really are in what the releases read (the search would find them)
    assert _found(good.read_bytes()) == [CANARY_TEXT, str(CANARY_NUMBER), CANARY_SUBJECT]
    assert CANARY_BAD in _found(bad.read_bytes())
    # the bad input is refused by the CLI's pre-flight (sds_release/store/inputs/preflight.py),
    # before the flow or GX run: no validation details are written and no run reaches Prefect
    assert not (home / "private" / "leak-bad").exists()
    assert not (home / "releases" / "tiny" / "leak-bad").exists()

    searched = {"console": b"".join(r.stdout + r.stderr for r in runs)}
    for root in (home / "releases", home / "prefect"):
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            searched[str(path.relative_to(home))] = path.read_bytes()
    assert any(name.endswith("prefect.db") for name in searched), sorted(searched)
    leaks = {name: found for name, data in searched.items() if (found := _found(data))}
    assert leaks == {}
    for rel in (home / "releases").glob("*/*"):  # also decoded Parquet, whole tokens
        assert forbidden_content_check(rel, secrets=CANARIES) == []

    # published files carry no local path: the input by name and sha256, no home
    for rel in (home / "releases").glob("*/leak-*"):
        for path in rel.iterdir():
            data = path.read_bytes()
            assert str(home).encode() not in data and str(inputs).encode() not in data, path
    manifest = json.loads((home / "releases" / "tiny" / "leak-ok" / "manifest.json").read_text())
    assert manifest["parameters"]["input"] == "people.csv"
    assert manifest["input"]["name"] == "people.csv" and "sha256" not in manifest["input"]
    assert len(manifest["input"]["commitment"]) == 64  # keyed: the plain hash is never published
    assert "home" not in manifest["parameters"]

    # files 0600, directories 0700: checked on every path under the home (private/, prefect/
    # with the Prefect database the temporary servers kept there, releases/, the ledger)
    paths = [home, *sorted(home.rglob("*"))]
    assert any(p.name == "release.key" for p in paths) and any(p.suffix == ".pkl" for p in paths)
    assert any(p.name == "prefect.db" for p in paths) and (home / "ledger.sqlite") in paths
    loose = {
        str(path.relative_to(home)): oct(mode)
        for path in paths
        if (mode := stat.S_IMODE(path.stat().st_mode)) != (0o700 if path.is_dir() else 0o600)
    }
    assert loose == {}
