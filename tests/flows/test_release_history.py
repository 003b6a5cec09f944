"""A dataset's releases over time (issue #40): `sds series` across three monthly releases, the
series the deployment rebuilds, `sds verify` of a series, and `sds audit --report` of a home with
a command-line release, a resumed one, a deployment run and a refused one; neither command reads
the sensitive data or charges the ledger."""

from __future__ import annotations

import hashlib
import json
import re
import stat
from pathlib import Path

import pandas as pd
import pytest

from sds_release.store.audit.journal import read_journal
from sds_release.store.ledger.book import Ledger
from sds_release.store.workspace.encoding import HALF_WIDTH_COLUMN
from tests.helpers import AUG, OCT, SEP, history_home, run_cli

PERIODS = (AUG, SEP, OCT)


@pytest.fixture(scope="module")
def history(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, prefect_server: str
) -> dict[str, object]:
    """The history home (tests/helpers.py: aug-1, sep-1 resumed, October deployed with its
    series, aug-2 refused), then `sds series monthly` into a folder of its own."""
    found = history_home(tmp_path_factory.mktemp("history"), tiny_csv)
    out = tmp_path_factory.mktemp("series") / "monthly"
    code, stdout, err = run_cli(
        "series", "monthly", "--home", str(found["home"]), "--out", str(out)
    )
    assert code == 0, err
    assert stdout.strip().splitlines()[-1] == str(out)
    return found | {"series": out}


def _series(history: dict) -> pd.DataFrame:
    return pd.read_parquet(history["series"] / "series.parquet")


def test_the_series_holds_every_published_count_of_the_three_months(history: dict) -> None:
    """Every combination of each month's aggregates.parquet is a row of its month with the same
    DP count and half-width; length 0 is the month's DP record count; every other combination
    of the union is that month's suppressed row, with no count (never 0)."""
    frame = _series(history)
    assert frame["period"].drop_duplicates().tolist() == list(PERIODS)
    union = set(frame["combination"]) - {""}
    suppressed_somewhere = False
    for period, folder in history["dirs"].items():
        agg = pd.read_parquet(folder / "aggregates.parquet")
        mine = frame[frame["period"] == period].set_index("combination")
        assert (mine["release_id"] == folder.name).all()
        assert (
            int(mine.loc["", "count"])
            == json.loads((folder / "manifest.json").read_text())["input"]["rows"]
        )
        published = agg.set_index("combination")
        assert not mine.loc[list(published.index), "suppressed"].any()
        assert (
            mine.loc[list(published.index), "count"].astype(int).tolist()
            == published["count"].tolist()
        )
        assert (
            mine.loc[list(published.index), HALF_WIDTH_COLUMN].tolist()
            == published[HALF_WIDTH_COLUMN].tolist()
        )
        missing = sorted(union - set(published.index))
        suppressed_somewhere |= bool(missing)
        assert mine.loc[missing, "suppressed"].all() and mine.loc[missing, "count"].isna().all()
    # the months differ (August and September, seeded, hold other rows): some month leaves out
    # a combination another reports; October's deployed release is unseeded, so which one is not
    # fixed
    assert suppressed_somewhere
    assert len(frame) == 3 * (len(union) + 1)  # R = 2 and the same columns every month


def test_the_page_holds_the_same_counts(history: dict) -> None:
    """series.html embeds every combination of series.parquet with the same count per month:
    "suppressed" (-1) where the table has a suppressed row, never 0 for one."""
    frame = _series(history)
    page = (history["series"] / "series.html").read_text()
    found = re.search(r"<script type='application/json' id='series'>(.*?)</script>", page)
    assert found is not None
    data = json.loads(found.group(1))
    assert [p["period"] for p in data["periods"]] == list(PERIODS)
    shown = {
        (name, PERIODS[i]): n
        for name, counts in zip(data["names"], data["counts"], strict=True)
        for i, n in enumerate(counts)
    }
    table = {
        (c, p): -1 if s else int(n)
        for c, p, n, s in zip(
            frame["combination"], frame["period"], frame["count"], frame["suppressed"], strict=True
        )
    }
    assert shown == table


def test_the_deployment_rebuilt_the_same_series(history: dict) -> None:
    """The deployed run's pin file asked for the series: HOME/series/monthly/2026-10 holds the
    same bytes as `sds series` (the same releases give the same files)."""
    deployed = history["deployed_series"]
    for name in ("series.parquet", "series.html", "series.json", "series.sig"):
        assert (deployed / name).read_bytes() == (history["series"] / name).read_bytes(), name


def test_sds_verify_checks_the_series_signature(history: dict, tmp_path: Path) -> None:
    """A copied series verifies; a changed count does not (the sha256), nor a manifest that no
    longer matches its signature."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(history["series"], copy)
    code, out, _ = run_cli("verify", str(copy))
    assert code == 0 and "series of dataset monthly: 2 files" in out and out.endswith("verified\n")
    frame = pd.read_parquet(copy / "series.parquet")
    frame.loc[frame["count"].notna().idxmax(), "count"] += 1
    frame.to_parquet(copy / "series.parquet", index=False)
    code, out, _ = run_cli("verify", str(copy))
    assert code == 1 and "series.parquet: sha256 does not match" in out
    shutil.copy(history["series"] / "series.parquet", copy / "series.parquet")
    manifest = json.loads((copy / "series.json").read_text())
    manifest["periods"] = manifest["periods"][:2]
    (copy / "series.json").write_text(json.dumps(manifest))
    code, out, _ = run_cli("verify", str(copy), "--json")
    assert code == 1 and json.loads(out)["signature_valid"] is False


def _page_rows(page: str) -> dict[str, dict[str, str]]:
    """data-* attributes of each release row of the audit page, by release id."""
    rows = {}
    for tag in re.findall(r"<tr class='release' [^>]*>", page):
        attrs = dict(re.findall(r"data-([a-z-]+)='([^']*)'", tag))
        rows[attrs["release"]] = attrs
    return rows


@pytest.fixture(scope="module")
def audit_page(history: dict) -> tuple[Path, str]:
    """`sds audit --report` of the history home: the path printed last and the page."""
    code, out, err = run_cli("audit", "--report", "--home", str(history["home"]))
    assert code == 0, err
    path = Path(out.strip().splitlines()[-1])
    return path, path.read_text()


def test_the_audit_page_lists_each_release_with_its_state_and_spend(
    history: dict, audit_page: tuple[Path, str]
) -> None:
    """The CLI release, the resumed one, the deployment run and the refused one, with their
    states, who started them and the ledger's spends; the page is private (0600)."""
    path, page = audit_page
    home = history["home"]
    assert path == home / "private" / "_audit" / "audit-report.html"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    october = history["dirs"][OCT].name
    rows = _page_rows(page)
    assert {r: (a["state"], a["runs"]) for r, a in rows.items()} == {
        "aug-1": ("complete", "1"),
        "sep-1": ("complete", "2"),
        october: ("complete", "1"),
        "aug-2": ("refused", "1"),
    }
    ledger = Ledger.open(home)
    for rid in ("aug-1", "sep-1", october):
        assert float(rows[rid]["epsilon-spent"]) == ledger.spent(rid)[0] == 2.0
    assert float(rows["aug-2"]["epsilon-spent"]) == 0.0
    assert "resumed, complete" in page and "resumed: command line" in page
    assert "deployment on-demand-monthly, run on demand (Prefect UI or API)" in page
    assert "refused" in page and "period &#x27;2026-08&#x27; of dataset" in page
    starts = [(e.event, e.release_id, e.origin.kind) for e in read_journal(home)]
    assert starts == [
        ("start", "aug-1", "cli"),
        ("start", "sep-1", "cli"),
        ("start", "sep-1", "cli"),
        ("start", october, "on-demand"),
        ("refused", "aug-2", "cli"),
    ]
    assert "No problem found" in page


def test_the_audit_totals_equal_budget_show(history: dict, audit_page: tuple[Path, str]) -> None:
    """The page's budget numbers are `sds budget show --json`'s, and its releases add up to
    the ledger's spent plus reserved."""
    _, page = audit_page
    code, out, _ = run_cli("budget", "show", "monthly", "--home", str(history["home"]), "--json")
    assert code == 0
    [shown] = json.loads(out)
    tag = re.search(r"<table class='budget' data-dataset='monthly'[^>]*>", page)
    assert tag is not None
    attrs = {k: float(v) for k, v in re.findall(r"data-([a-z-]+)='([0-9.e+-]+)'", tag.group(0))}
    assert attrs["epsilon-spent"] == shown["epsilon_spent"] == 6.0
    assert attrs["epsilon-reserved"] == shown["epsilon_reserved"] == 0.0
    assert attrs["epsilon-left"] == shown["epsilon_remaining"]
    assert attrs["delta-left"] == shown["delta_remaining"]
    assert attrs["entries-epsilon"] == shown["epsilon_spent"] + shown["epsilon_reserved"]


def test_neither_command_reads_the_data_or_charges_the_ledger(
    history: dict, tmp_path: Path
) -> None:
    """With the input gone, `sds series` and `sds audit --report` still succeed, and the ledger's
    rows and file are byte for byte what they were."""
    home, data = history["home"], history["data"]
    ledger_file = home / "ledger.sqlite"
    rows = Ledger.open(home).rows()
    before = hashlib.sha256(ledger_file.read_bytes()).hexdigest()
    hidden = data.rename(tmp_path / "elsewhere.csv")
    try:
        code, _, err = run_cli(
            "series", "monthly", "--home", str(home), "--out", str(tmp_path / "s")
        )
        assert code == 0, err
        code, _, err = run_cli(
            "audit", "--report", "--home", str(home), "--out", str(tmp_path / "a.html")
        )
        assert code == 0, err
    finally:
        hidden.rename(data)
    assert Ledger.open(home).rows() == rows
    assert hashlib.sha256(ledger_file.read_bytes()).hexdigest() == before
