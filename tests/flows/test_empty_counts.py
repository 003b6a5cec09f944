"""A release whose DP counts keep no 1-way count (a small table or a small ε) cannot build
records: it ends before synthesis with a message that says why and what to do, keeps what the
counting drew charged and is closed (a resume would draw the same counts): nothing to resume,
nothing new charged, ``sds cancel`` a no-op."""

from __future__ import annotations

import json
from pathlib import Path

from sds_release.store.ledger.book import Ledger
from tests.helpers import charges, complete_releases, run_cli


def test_no_one_way_count_ends_the_release_saying_what_to_do(
    tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    rid = "too-small"
    code, _, err = run_cli(
        "release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home),
        "--record-limit", "30", "--epsilon", "0.1", "--seed", "1", "--release-id", rid,
        "--quiet",
    )  # fmt: skip
    assert code == 1
    said = " ".join(err.split())
    assert "every count of length 1 fell below its threshold" in said
    assert "at epsilon 0.1" in said and "'sds plan'" in said
    assert "the release is closed (a resume would draw the same counts)" in said
    assert "Raise epsilon, release more rows or a smaller reporting_length" in said
    spent = charges(home)
    assert spent and {c.release_id for c in spent} == {rid}  # the DP counts were drawn
    assert complete_releases(home) == []
    reservation = Ledger.open(home).reservation(rid)
    assert reservation is not None and reservation.status == "cancelled"
    manifest = json.loads(next(home.glob(f"releases/tiny/{rid}/manifest.json")).read_text())
    assert (manifest["status"], manifest["resumable"]) == ("failed", False)

    code, _, err = run_cli("resume", rid, "--home", str(home), "--quiet")
    said = " ".join(err.split())
    assert code == 1 and f"release '{rid}' is closed" in said and "nothing to resume" in said
    assert charges(home) == spent  # the resume drew nothing new

    code, out, _ = run_cli("cancel", rid, "--home", str(home))
    assert code == 0 and f"cancelled {rid}" in out  # already closed: the same result
    assert charges(home) == spent and complete_releases(home) == []
