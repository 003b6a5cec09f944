"""report.html and explorer.html of a real release, in a real browser (Debian's Chromium).

Playwright drives the system Chromium (no browser download). Checks: no console error, no
network request, every chart drawn (its SVG marks counted), the explorer's counts follow the
selection and match aggregates.parquet / synthetic.csv, and the printed report cuts no chart.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.helpers import COLUMNS, TINY_CONFIG, FilePage, charges, chromium_browser, run_cli

pytestmark = [pytest.mark.browser, pytest.mark.server]


SUPPRESSED = "code"  # a column none of whose values is reported: the report says so, no chart
ALL = [*COLUMNS, SUPPRESSED]


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, prefect_server: str) -> Path:
    """One complete release of the tiny table plus a column holding 3 values once each (every
    1-way count of it falls below the threshold) (R = 3, ε = 6; fixed id and seed: same noise)."""
    folder = tmp_path_factory.mktemp("browserdata")
    frame = pd.read_csv(tiny_csv, dtype=str, keep_default_na=False)
    frame[SUPPRESSED] = [
        "x1" if i == 3 else "x2" if i == 50 else "x3" if i == 99 else "" for i in range(len(frame))
    ]
    data = folder / "tiny-code.csv"
    frame.to_csv(data, index=False)
    config = folder / "tiny-code.toml"
    config.write_text(TINY_CONFIG + f'\n[[schema.columns]]\nname = "{SUPPRESSED}"\n')
    home = tmp_path_factory.mktemp("browserhome")
    code, out, err = run_cli(
        "release", str(data), "--config", str(config), "--home", str(home),
        "--seed", "5", "--epsilon", "6", "--reporting-length", "3", "--release-id", "browser-1",
        "--quiet",
    )  # fmt: skip
    assert code == 0, err
    return Path(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def browser(released: Path) -> Iterator[Any]:
    """Headless system Chromium through Playwright, for the whole module.

    Started after the release: Playwright's sync API runs an event loop in this thread, and a
    Prefect flow called inside a running loop would run asynchronously.
    """
    with chromium_browser() as b:
        yield b


def _pairs_with_data(agg: pd.DataFrame, syn: pd.DataFrame) -> int:
    """Column pairs with a reported DP 2-way count and a synthetic record holding both."""
    two = agg[agg["length"] == 2]
    n = 0
    for a, b in itertools.combinations(ALL, 2):
        dp = two[two[a].notna() & two[b].notna()]
        both = ((syn[a] != "") & (syn[b] != "")).any()
        n += int(len(dp) > 0 and both)
    return n


def test_report_draws_every_chart(browser: Any, released: Path) -> None:
    """Every figure draws its marks; the counts follow the published files; nothing loaded."""
    page = FilePage(browser, released / "report.html")
    figs = page.page.eval_on_selector_all(
        "figure.chart",
        """els => els.map(f => ({id: f.id, expected: +f.dataset.marks,
            drawn: f.querySelectorAll('svg .mark').length,
            width: f.querySelector('svg').getBoundingClientRect().width,
            height: f.querySelector('svg').getBoundingClientRect().height}))""",
    )
    page.clean()
    by_id = {f["id"]: f for f in figs}
    for f in figs:
        assert f["drawn"] == f["expected"] > 0, f
        assert f["width"] > 200 and f["height"] > 40, f
    agg = pd.read_parquet(released / "aggregates.parquet")
    syn = pd.read_csv(released / "synthetic.csv", dtype=str, keep_default_na=False)
    assert by_id["fig-spend"]["drawn"] == len(charges(released.parents[2])) == 4
    suppressed = []
    for i, col in enumerate(ALL):  # DP + synthetic bar per published value (<= 25 shown)
        values = set(agg.loc[agg["length"] == 1, col].dropna()) | (set(syn[col]) - {""})
        if values:
            assert by_id[f"fig-oneway-{i}"]["drawn"] == 2 * min(len(values), 25)
            assert page.page.locator(f"#oneway-none-{i}").count() == 0
        else:  # nothing published for the column: a note says so instead of a chart
            assert f"fig-oneway-{i}" not in by_id
            assert page.page.locator(f"#oneway-none-{i}").count() == 1
            suppressed.append(col)
    assert suppressed == [SUPPRESSED]  # the note's branch ran, for the column built for it
    assert by_id["fig-pair-tvd"]["drawn"] == 2 * _pairs_with_data(agg, syn)
    for fig in ("fig-noise", "fig-within-noise", "fig-error-length"):
        assert fig in by_id
    assert "fig-budget" not in by_id and "fig-timing" not in by_id  # the custodian report's


def test_report_prints_without_cut_charts(browser: Any, released: Path) -> None:
    """Printed to A4 PDF, each figure's title and its source line are on the same page."""
    from pypdf import PdfReader

    page = FilePage(browser, released / "report.html")
    page.page.emulate_media(media="print")
    wide = page.page.eval_on_selector_all(
        "figure.chart svg",
        "els => els.filter(s => s.getBoundingClientRect().right > "
        "document.documentElement.clientWidth + 1).length",
    )
    assert wide == 0
    n_figs = page.page.locator("figure.chart").count()
    pdf = page.page.pdf(format="A4", print_background=True)
    page.clean()
    texts = [" ".join(p.extract_text().split()) for p in PdfReader(io.BytesIO(pdf)).pages]
    assert len(texts) >= 2
    for n in range(1, n_figs + 1):
        top = [i for i, t in enumerate(texts) if re.search(rf"Figure {n}\. ", t)]
        bottom = [i for i, t in enumerate(texts) if f"Figure {n} is computed from" in t]
        assert len(top) == 1 and top == bottom, (n, top, bottom)


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def test_explorer_follows_the_selection(browser: Any, released: Path) -> None:
    """Counts shown for 0..3 selected values equal aggregates.parquet and synthetic.csv."""
    agg = pd.read_parquet(released / "aggregates.parquet")
    syn = pd.read_csv(released / "synthetic.csv", dtype=str, keep_default_na=False)
    manifest = json.loads((released / "manifest.json").read_text())
    page = FilePage(browser, released / "explorer.html")
    p = page.page
    p.wait_for_selector("body[data-ready='1']")
    assert _count(p.inner_text("#dp-count")) == manifest["input"]["rows"]
    assert _count(p.inner_text("#syn-count")) == len(syn)
    # the largest reported length-3 combination, selected value by value
    three = agg[agg["length"] == 3].sort_values(["count", "combination"], ascending=[False, True])
    row = three.iloc[0]
    chosen = [(c, row[c]) for c in ALL if pd.notna(row[c])]
    for k in range(1, 4):
        sel = dict(chosen[:k])
        p.select_option(f"select[data-column='{chosen[k - 1][0]}']", value=chosen[k - 1][1])
        mask = agg["length"] == k
        for c in ALL:
            mask &= agg[c] == sel[c] if c in sel else agg[c].isna()
        assert mask.sum() == 1
        assert _count(p.inner_text("#dp-count")) == int(agg.loc[mask, "count"].iloc[0])
        holds = pd.Series(True, index=syn.index)
        for c, v in sel.items():
            holds &= syn[c] == v
        assert _count(p.inner_text("#syn-count")) == int(holds.sum())
        assert "95% noise interval" in p.inner_text("#dp-interval")
    disabled = p.eval_on_selector_all("select.col", "els => els.filter(e => e.disabled).length")
    assert disabled == p.locator("select.col").count() - 3  # R values chosen: no fourth column
    # a combination the release does not report reads "suppressed"
    p.click("#clear")
    one = list(agg.loc[agg["length"] == 1, "combination"])
    missing = next(
        combo
        for k in (2, 3)
        for combo in itertools.combinations(one, k)
        if len({t.split(":")[0] for t in combo}) == k
        and ";".join(sorted(combo, key=str.encode)) not in set(agg["combination"])
    )
    for text in missing:
        col, value = text.split(":", 1)
        p.select_option(f"select[data-column='{col}']", value=value)
    assert p.inner_text("#dp-count") == "suppressed"
    page.clean()


def test_explorer_table_of_largest_extensions(browser: Any, released: Path) -> None:
    """The table lists the selection's largest extensions; clicking a row selects it."""
    agg = pd.read_parquet(released / "aggregates.parquet")
    page = FilePage(browser, released / "explorer.html")
    p = page.page
    p.wait_for_selector("body[data-ready='1']")
    one = agg[agg["length"] == 1].sort_values("count", ascending=False)
    first = p.locator("#top-rows tr").first
    assert first.locator("td").nth(0).inner_text() == one["combination"].iloc[0]
    assert _count(first.locator("td").nth(1).inner_text()) == int(one["count"].iloc[0])
    assert p.locator("#top-rows tr").count() == min(len(one), 50)
    first.click()  # drill down: the selection is now that value; rows are its extensions
    assert _count(p.inner_text("#dp-count")) == int(one["count"].iloc[0])
    value = one["combination"].iloc[0]
    cells = p.locator("#top-rows tr td:first-child").all_inner_texts()
    assert cells and all(value in c.split("; ") and len(c.split("; ")) == 2 for c in cells)
    page.clean()
