"""series.html and the audit page of a real home, in a real browser (Debian's Chromium).

The history home (tests/helpers.py: three monthly releases, one resumed, one by a deployment,
and a refused one). Checks: the series chart of a chosen combination draws one point and one
error bar per reported month with the published values, "suppressed" where a month did not
report it, the changes beyond the noise that Python finds; the audit page lists every release;
no console error and no network request on either page.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sds_release.store.series.table import changes
from sds_release.store.workspace.encoding import HALF_WIDTH_COLUMN
from tests.helpers import AUG, OCT, SEP, FilePage, chromium_browser, history_home, run_cli

pytestmark = [pytest.mark.browser, pytest.mark.server]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, prefect_server: str) -> dict:
    """The history home, its series (`sds series`) and its audit page (`sds audit --report`)."""
    found = history_home(tmp_path_factory.mktemp("pages"), tiny_csv)
    home = str(found["home"])
    code, out, err = run_cli("series", "monthly", "--home", home)
    assert code == 0, err
    series = Path(out.strip().splitlines()[-1])
    code, out, err = run_cli("audit", "--report", "--home", home)
    assert code == 0, err
    return found | {"series": series, "audit": Path(out.strip().splitlines()[-1])}


@pytest.fixture(scope="module")
def browser(pages: dict) -> Iterator[Any]:
    """Headless system Chromium through Playwright (started after the releases: see
    tests.helpers.chromium_browser)."""
    with chromium_browser() as b:
        yield b


def _gappy(frame: pd.DataFrame) -> str:
    """A combination of length 2 reported in some month and suppressed in another (the first in
    the table's order): the months are built so that one exists."""
    two = frame[frame["length"] == 2]
    per = two.groupby("combination")["suppressed"].agg(["any", "all"])
    return str(per[per["any"] & ~per["all"]].index[0])


def test_the_series_chart_shows_each_month(browser: Any, pages: dict) -> None:
    """For a pair reported in some months only: a point and an error bar per reported month
    with its DP count and count ± half-width, "suppressed" (never 0) in the others, and the
    changes beyond the noise exactly where Python finds them."""
    frame = pd.read_parquet(pages["series"] / "series.parquet")
    combination = _gappy(frame)
    rows = frame[frame["combination"] == combination].set_index("period")
    page = FilePage(browser, pages["series"] / "series.html")
    p = page.page
    p.wait_for_selector("body[data-ready='1']")
    for part in combination.split(";"):
        column, value = part.split(":", 1)
        p.select_option(f"select[data-column='{column}']", value=value)
    assert p.inner_text("#combination") == combination
    points = p.eval_on_selector_all(
        "svg .mark.point", "els => els.map(e => [e.dataset.period, +e.dataset.count])"
    )
    bars = p.eval_on_selector_all(
        "svg .mark.bar", "els => els.map(e => [e.dataset.period, +e.dataset.low, +e.dataset.high])"
    )
    shown = rows[~rows["suppressed"]]
    assert points == [[m, int(n)] for m, n in shown["count"].items()]
    assert [b[0] for b in bars] == list(shown.index)
    for (_, low, high), n, h in zip(bars, shown["count"], shown[HALF_WIDTH_COLUMN], strict=True):
        assert math.isclose(low, n - h, abs_tol=0.006) and math.isclose(high, n + h, abs_tol=0.006)
    suppressed = list(rows.index[rows["suppressed"]])
    assert suppressed
    assert (
        p.eval_on_selector_all("svg .mark.suppressed", "els => els.map(e => e.dataset.period)")
        == suppressed
    )
    cells = dict(
        zip(
            p.locator("#point-rows tr td:nth-child(1)").all_inner_texts(),
            p.locator("#point-rows tr td.count").all_inner_texts(),
            strict=True,
        )
    )
    assert list(cells) == [AUG, SEP, OCT]
    for month in suppressed:
        assert cells[month] == "suppressed"
    found = changes(frame, [AUG, SEP, OCT])
    mine = found[(found["combination"] == combination) & found["exceeds_noise"]]
    marked = p.eval_on_selector_all("svg .mark.change", "els => els.map(e => e.dataset.period)")
    assert marked == mine["period_to"].tolist()
    page.clean()


def test_the_largest_changes_lead_to_their_combination(browser: Any, pages: dict) -> None:
    """The table's first row is the largest change beyond the noise; a click selects that
    combination (the selectors show its values), whose chart marks the change; "Clear the
    selection" leaves every selector at "(any)": all records."""
    frame = pd.read_parquet(pages["series"] / "series.parquet")
    found = changes(frame, [AUG, SEP, OCT])
    beyond = found[found["exceeds_noise"]].copy()
    beyond["size"] = beyond["change"].abs()
    top = beyond.sort_values("size", ascending=False, kind="stable").iloc[0]
    page = FilePage(browser, pages["series"] / "series.html")
    p = page.page
    p.wait_for_selector("body[data-ready='1']")
    first = p.locator("#change-rows tr").first
    cells = first.locator("td").all_inner_texts()
    assert int(cells[4].replace(",", "")) == int(top["change"])
    assert p.locator("#change-rows tr").count() == min(len(beyond), 50)
    first.click()
    assert p.inner_text("#combination") == (top["combination"] or "all records")
    marked = p.eval_on_selector_all("svg .mark.change", "els => els.map(e => e.dataset.period)")
    assert top["period_to"] in marked
    chosen = "els => els.filter(e => e.value).map(e => e.dataset.column + ':' + e.value)"
    shown = p.eval_on_selector_all("select.col", chosen)
    assert sorted(shown) == sorted(top["combination"].split(";") if top["combination"] else [])
    p.click("#clear")
    assert p.eval_on_selector_all("select.col", chosen) == []
    assert p.inner_text("#combination") == "all records"
    page.clean()


def test_the_audit_page_lists_every_release(browser: Any, pages: dict) -> None:
    """Every release of the home is a row (the refused one too), each reservation a point of
    the ε chart; nothing is loaded."""
    page = FilePage(browser, pages["audit"])
    p = page.page
    ids = p.eval_on_selector_all("tr.release", "els => els.map(e => e.dataset.release)")
    october = pages["dirs"][OCT].name
    assert sorted(ids) == sorted(["aug-1", "sep-1", october, "aug-2"])
    states = p.eval_on_selector_all("tr.release", "els => els.map(e => e.dataset.state)")
    assert sorted(states) == ["complete", "complete", "complete", "refused"]
    assert p.locator("#fig-epsilon svg .mark").count() == 3
    assert p.locator("table.budget").count() == 1
    page.clean()
