"""What a published release claims (issue #27 points 6 and 7), through ``sds release`` in a
subprocess (its own temporary Prefect server): a seeded release says it is not private on the
CLI's stderr (once), in the manifest's privacy section and on the first line of report.html and
explorer.html; the manifest and the ledger's aggregate-1 charge record the effective δ."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sds_release.store.ledger.book import Ledger
from sds_release.store.run.claims import SEEDED_WARNING

PROJECT = Path(__file__).resolve().parents[2]
EXAMPLE = PROJECT / "examples" / "pums_ca_10k.csv"
CONFIG = PROJECT / "examples" / "release.toml"


def _sds(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect")}
    for var in ("PREFECT_API_URL", "SDS_HOME", "SDS_TEST_KILL_AT"):
        env.pop(var, None)
    return subprocess.run(
        [sys.executable, "-m", "sds_release.flows.cli", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
def test_a_seeded_release_says_it_is_not_private_everywhere(tmp_path: Path) -> None:
    """--seed: one warning on stderr; manifest privacy.private false with the reason; the
    report's and explorer's first line is the reason; effective δ ≤ δ in the manifest and in
    the aggregate-1 charge."""
    home = tmp_path / "home"
    args = ["release", str(EXAMPLE), "--config", str(CONFIG), "--home", str(home)]
    args += ["--record-limit", "1500", "--reporting-length", "2", "--seed", "7", "--quiet"]
    done = _sds(*args, tmp=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("NOT PRIVATE") == 1, done.stderr
    release = Path(done.stdout.strip().splitlines()[-1])

    privacy = json.loads((release / "manifest.json").read_text())["privacy"]
    assert privacy["private"] is False and privacy["not_private"] == SEEDED_WARNING
    parts = privacy["delta_parts"]
    assert privacy["effective_delta"] <= privacy["delta"]
    assert parts["zcdp"] == privacy["delta"] / 2
    assert 0 < parts["noise_sampler"] < 1e-12
    assert parts["one_tuple_threshold"] + parts["noise_sampler"] <= privacy["delta"] / 2

    for page in ("report.html", "explorer.html"):
        body = (release / page).read_text().split("<body>", 1)[1]
        first = re.match(r"<p[^>]*>(.*?)</p>", body)
        assert first is not None and first.group(1).startswith("NOT PRIVATE: this release"), page

    [charge] = [c for c in Ledger.open(home).charges() if c.stage == "aggregate-1"]
    assert charge.detail == {"effective_delta": privacy["effective_delta"], "delta_parts": parts}
    assert charge.delta >= parts["one_tuple_threshold"] + parts["noise_sampler"]
    assert Ledger.open(home).verify().ok
