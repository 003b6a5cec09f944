"""``series.html``: a dataset's DP counts over its periods, in one self-contained offline page.

Embeds, as JSON, every combination of the series table with its DP count per period (or
suppressed, or not released by that period's release), each period's release, ε, δ and
per-length 95% noise half-width, and the largest changes between consecutive periods that
exceed their combined noise interval; ``templates/series.js`` draws the chosen combination's
counts with error bars. Nothing is loaded from anywhere (the release pages' CSP).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from sds_release.store.report.charts import esc
from sds_release.store.report.offline import CSP, json_for_script, page_scripts, template
from sds_release.store.series.sources import SeriesSources
from sds_release.store.series.table import SERIES_COLUMNS, ReleaseScope

__all__ = ["NOT_RELEASED", "SUPPRESSED", "TOP_CHANGES", "series_html", "series_payload"]

TOP_CHANGES = 50
"""Rows of the page's table of the largest changes beyond the noise."""
SUPPRESSED = -1
"""A period's count of a combination its release did not report (below the threshold)."""
NOT_RELEASED = -2
"""A period's count of a combination beyond its release's reporting length or columns."""


def _template(name: str) -> str:
    return template(name, "sds_release.store.series")


def series_payload(
    sources: SeriesSources,
    frame: pd.DataFrame,
    scopes: Sequence[ReleaseScope],
    changed: pd.DataFrame,
    *,
    top: int = TOP_CHANGES,
) -> dict[str, Any]:
    """The page's data: periods, attributes, combinations with a count per period, changes.

    ``attrs`` are the (column, value) pairs of every combination (column in the series' column
    order); a combination is its sorted attribute ids (``names``: its text form, as in
    ``series.parquet``); ``counts[i][p]`` is its DP count in
    period ``p``, :data:`SUPPRESSED` or :data:`NOT_RELEASED`. ``changes`` are the ``top``
    largest changes beyond the noise: [combination, period index (the later one), change,
    combined half-width], largest first.
    """
    periods = [r.period for r in sources.releases]
    columns = list(frame.columns[len(SERIES_COLUMNS) :])
    combos = frame.drop_duplicates("combination")[["length", "combination", *columns]]
    attrs: list[tuple[int, str]] = []
    attr_id: dict[tuple[int, str], int] = {}
    combo_attrs = []
    for row in combos.itertuples(index=False):
        ids = []
        for j in range(len(columns)):
            value = row[2 + j]
            if pd.isna(value):
                continue
            key = (j, str(value))
            if key not in attr_id:
                attr_id[key] = len(attrs)
                attrs.append(key)
            ids.append(attr_id[key])
        combo_attrs.append(ids)
    # attribute ids in column order, then value order (so the selectors list values sorted)
    order = sorted(range(len(attrs)), key=lambda a: (attrs[a][0], attrs[a][1].encode()))
    renumber = {old: new for new, old in enumerate(order)}
    attrs = [attrs[a] for a in order]
    combo_attrs = [sorted(renumber[a] for a in ids) for ids in combo_attrs]
    index = {c: i for i, c in enumerate(combos["combination"])}
    counts = [[NOT_RELEASED] * len(periods) for _ in index]
    pidx = {p: i for i, p in enumerate(periods)}
    for comb, period, count, suppressed in zip(
        frame["combination"], frame["period"], frame["count"], frame["suppressed"], strict=True
    ):
        counts[index[comb]][pidx[period]] = SUPPRESSED if suppressed else int(count)
    big = changed[changed["exceeds_noise"]].copy()
    big["_abs"] = big["change"].abs()
    big["_c"] = big["combination"].map(lambda t: t.encode())
    big = big.sort_values(["_abs", "_c", "period_to"], ascending=[False, True, True]).head(top)
    return {
        "dataset": sources.dataset,
        "by_period": sources.by_period,
        "columns": columns,
        "periods": [r.facts() | s.to_dict() for r, s in zip(sources.releases, scopes, strict=True)],
        "attrs": [[c, v] for c, v in attrs],
        "combos": combo_attrs,
        "names": combos["combination"].tolist(),
        "counts": counts,
        "changes": [
            [
                index[c],
                pidx[p],
                int(d),
                float(h),
            ]
            for c, p, d, h in zip(
                big["combination"],
                big["period_to"],
                big["change"],
                big["noise_half_width_95_combined"],
                strict=True,
            )
        ],
        "changes_beyond_noise": int(changed["exceeds_noise"].sum()),
        "changes_compared": len(changed),
        "suppressed": SUPPRESSED,
        "not_released": NOT_RELEASED,
    }


def series_html(payload: dict[str, Any]) -> str:
    """The series page (deterministic: the same payload gives the same bytes)."""
    periods = payload["periods"]
    what = "period" if payload["by_period"] else "release"
    span = f"{periods[0]['period']} to {periods[-1]['period']}" if len(periods) > 1 else ""
    eps = sorted({p["epsilon"] for p in periods})
    eps_text = (
        f"each (ε = {eps[0]:.4g})"
        if len(eps) == 1
        else f"with ε from {eps[0]:.4g} to {eps[-1]:.4g} (each point carries its own interval)"
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Series: {esc(payload['dataset'])}</title>"
        f"<style>{_template('series.css')}</style></head><body>"
        f"<h1>DP counts over time</h1><p class='meta'>Dataset {esc(payload['dataset'])}: "
        f"{len(periods)} {what}(s) {esc(span)}, differentially private {esc(eps_text)}.</p>"
        "<p class='note'>Choose values for some columns to see that combination's DP count in "
        f"every {what}, with its 95% noise interval (±1.96 standard deviations of the noise; "
        "rounding and the consistency post-processing are not included). A count the release "
        "did not report (below its threshold) is shown as suppressed, never as 0; a "
        "combination longer than a release's reporting length, or over a column it did not "
        "release, is shown as not released. A change between consecutive "
        f"{what}s is marked when it is larger than the combined 95% interval of the two "
        "noises (√(h₁² + h₂²)). Everything here comes from the releases' published "
        "aggregates.parquet and manifest.json (series.parquet holds the same table).</p>"
        "<p id='status'>Loading…</p><div id='selectors'></div>"
        "<button id='clear' type='button'>Clear the selection</button>"
        "<h2 id='combination'></h2><div id='chart'></div>"
        "<p class='legend'>● the DP count and its 95% noise interval · red line: a change "
        "larger than the combined noise · dashed: within the noise · □ suppressed</p>"
        "<table id='points'><thead><tr><th>" + what + "</th><th>release</th>"
        "<th class='num'>ε</th><th class='num'>DP count</th><th class='num'>95% noise</th>"
        "<th class='num'>change</th><th>beyond the noise</th></tr></thead>"
        "<tbody id='point-rows'></tbody></table>"
        "<h2>Largest changes beyond the noise</h2><p id='changes-caption'></p>"
        "<table id='changes'><thead><tr><th>combination</th><th>from</th><th>to</th>"
        "<th class='num'>DP counts</th><th class='num'>change</th>"
        "<th class='num'>combined 95% noise</th></tr></thead>"
        "<tbody id='change-rows'></tbody></table>"
        f"<script type='application/json' id='series'>{json_for_script(payload)}</script>"
        f"{page_scripts('series.js', 'sds_release.store.series')}</body></html>"
    )
