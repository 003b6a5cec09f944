"""``report.html``: the human-readable release report (one self-contained file, inline SVG).

A plain-language summary (what was released, the guarantee, the DP record count), then charts,
each built only from published DP values (and the published evaluation, itself computed from
them) and saying under it what it is computed from. Input: :class:`ReportInputs`. The dataset's
budget around the release (which other releases spent) and the stage times (most follow the
data) are not published: they are in the private custodian report
(:mod:`sds_release.store.report.custodian`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sds_release.store.report.charts import (
    Series,
    delta_text,
    eps_text,
    esc,
    hbars,
    heatmap,
    num,
    vbars,
)
from sds_release.store.report.inputs import ReportInputs, count_sd, laplace_half_width
from sds_release.store.report.offline import CSP as CSP  # re-exported (explorer, custodian)
from sds_release.store.report.offline import template as template

MAX_VALUES = 25
"""Largest number of values drawn per column in the 1-way charts (the largest by DP count)."""


def not_private_banner(manifest: dict[str, Any]) -> str:
    """The page's first line when the release is not private (seeded: ``privacy.not_private``,
    :data:`sds_release.store.run.claims.SEEDED_WARNING`), else nothing."""
    reason = manifest.get("privacy", {}).get("not_private")
    style = "background:#fde8e8;border-left:4px solid #c0392b;padding:.5em .8em;font-weight:bold"
    return f"<p role='alert' style='{style}'>{esc(reason)}</p>" if reason else ""


@dataclass(frozen=True, slots=True)
class Figure:
    """One chart: its element id, title, SVG and the sentence saying what it is computed from."""

    fig_id: str
    title: str
    svg: str
    source: str

    def html(self, number: int) -> str:
        """The ``<figure>``; ``data-marks`` is the number of data marks its SVG draws."""
        marks = self.svg.count('class="mark"')
        return (
            f'<figure class="chart" id="{esc(self.fig_id)}" data-marks="{marks}">'
            f"<figcaption>Figure {number}. {esc(self.title)}</figcaption>{self.svg}"
            f'<p class="source">Figure {number} is computed from: {esc(self.source)}</p></figure>'
        )


def summary(inputs: ReportInputs) -> str:
    """The plain-language summary: what, the guarantee, the DP record count, the plan."""
    m = inputs.manifest
    p, params = m["privacy"], m.get("parameters", {})
    a = inputs.agreement
    reported = {k: la.n_reported for k, la in a.by_len.items()}
    columns = ", ".join(esc(c) for c in a.domain.columns)
    rows = int(m["input"]["rows"])
    rc = inputs.noise.get("record_count")
    rows_note = (
        f" It is a noisy count: with 95% probability it lies within "
        f"±{laplace_half_width(float(rc['scale'])):.0f} "
        "of the true count, which is never published."
        if isinstance(rc, dict)
        else " (the synthesizer's own DP count)."
    )
    parts = [
        f'<p class="lead">This release of dataset <b>{esc(m["dataset"])}</b> publishes '
        f"<b>{sum(reported.values()):,}</b> differentially private counts of combinations of up "
        f"to {a.reporting_length} attributes of the columns {columns} "
        f"({', '.join(f'{n:,} of length {k}' for k, n in sorted(reported.items()))}), and "
        f"<b>{inputs.synthetic_records:,}</b> synthetic records generated from those counts "
        f"alone (synthesizer <code>{esc(params.get('synthesizer', ''))}</code>).</p>",
        f'<p class="lead"><b>The guarantee:</b> whether or not any one person\'s record is in '
        f"the data changes the probability of anything in this release by at most a factor "
        f"e<sup>ε</sup> = {math.exp(p['epsilon']):.3g} (ε = {eps_text(p['epsilon'])}), except with "
        f"probability δ = {delta_text(p['delta'])}.</p>",
        f"<p><b>Protected record count:</b> {rows:,}.{rows_note}</p>",
    ]
    plan = m.get("plan")
    if isinstance(plan, dict) and plan.get("reason"):  # the SDS plan: R, split, synthesis
        parts.append(f"<p><b>How it was planned:</b> {esc(str(plan['reason']))}</p>")
    period = params.get("period")
    if period is not None:  # a public parameter; the budget around the release is private
        parts.append(
            f"<p><b>Period {esc(period)}:</b> this release holds only the rows of period "
            f"<b>{esc(period)}</b> and is paid from that period's own budget, set per period "
            "(periods hold disjoint records: parallel composition).</p>"
        )
    return "".join(parts)


def privacy_figures(inputs: ReportInputs) -> list[Figure]:
    """Spend by stage and each length's noise scale and threshold."""
    p = inputs.manifest["privacy"]
    stages = p.get("stages") or []
    out = [
        Figure(
            "fig-spend",
            "Privacy spend by stage (ε)",
            hbars(
                [s["stage"] for s in stages],
                [Series("ε", tuple(float(s["epsilon"]) for s in stages))],
                label="privacy spend by stage",
                value_format=eps_text,
            ),
            "manifest.json privacy.stages (the ledger's charges for this "
            "release; public parameters of the mechanisms).",
        )
    ]
    by_length = inputs.noise.get("by_length") or []
    if by_length:
        sd = inputs.sd_by_len()
        out.append(
            Figure(
                "fig-noise",
                "Noise and threshold by combination length",
                vbars(
                    [f"length {e['length']}" for e in by_length],
                    [
                        Series(
                            "noise standard deviation", tuple(sd[e["length"]] for e in by_length)
                        ),
                        Series(
                            "threshold",
                            tuple(
                                None if e["threshold"] is None else float(e["threshold"])
                                for e in by_length
                            ),
                        ),
                    ],
                    label="noise and threshold by length",
                    value_format=lambda v: f"{v:.3g}",
                ),
                "manifest.json privacy.noise (σ_k·√Δ_k and the threshold of each "
                "length; the budget plan and the DP-selected sensitivity Δ_k). "
                + str(inputs.noise.get("how_to_read", "")),
            )
        )
    return out


def column_warning_notes(inputs: ReportInputs) -> str:
    """One note per column whose records do not follow its DP 1-way counts (the option that
    would do better included); the CLI prints the same lines once."""
    return "".join(
        f"<p class='note warning' id='warn-{esc(w['column'])}-{esc(w['kind'])}'><b>Warning, "
        f"{esc(w['column'])}:</b> {esc(w['message'])}.</p>"
        for w in inputs.evaluation.get("warnings") or []
    )


def unpublished_columns(inputs: ReportInputs) -> str:
    """A note naming the columns none of whose values the release reports (no chart for them)."""
    a = inputs.agreement
    empty = [(c, n) for c, n in enumerate(a.domain.columns) if not a.one_way(c).labels]
    return "".join(
        f"<p class='note' id='oneway-none-{c}'><b>{esc(n)}</b>: no value of this column is "
        "reported (every 1-way count fell below the length-1 threshold) and no synthetic record "
        "holds one, so it has no chart.</p>"
        for c, n in empty
    )


def distribution_figures(inputs: ReportInputs) -> list[Figure]:
    """For each column, its 1-way counts in the DP aggregates and in the synthetic records,
    with the column's warnings (``evaluation.json`` ``warnings``) in its caption."""
    a = inputs.agreement
    warned: dict[str, list[dict[str, Any]]] = {}
    for w in inputs.evaluation.get("warnings") or []:
        warned.setdefault(w["column"], []).append(w)
    out = []
    for c, name in enumerate(a.domain.columns):
        one = a.one_way(c)
        if not one.labels:
            continue
        order = sorted(
            range(len(one.labels)), key=lambda i: (-max(int(one.dp[i]), 0), one.labels[i])
        )
        shown = order[:MAX_VALUES]
        more = len(order) - len(shown)
        out.append(
            Figure(
                f"fig-oneway-{c}",
                f"{name}: DP aggregates vs synthetic records"
                + (f" (the {len(shown)} largest of {len(order)} values)" if more else ""),
                hbars(
                    [one.labels[i] for i in shown],
                    [
                        Series(
                            "DP aggregate",
                            tuple(None if one.dp[i] < 0 else float(one.dp[i]) for i in shown),
                        ),
                        Series("synthetic", tuple(float(one.synthetic[i]) for i in shown)),
                    ],
                    label=f"1-way distribution of {name}",
                ),
                "aggregates.parquet (DP counts of length 1; 'not reported' = "
                "suppressed) and synthetic.parquet (records holding each value)."
                + "".join(f" Warning: {w['message']}." for w in warned.get(name, [])),
            )
        )
    return out


def pair_figure(inputs: ReportInputs) -> list[Figure]:
    """The 2-way TVD of every column pair, DP aggregates vs synthetic records, as a heatmap."""
    a = inputs.agreement
    if a.reporting_length < 2 or a.domain.n_columns < 2:
        return []
    tvd = a.pair_tvd()
    return [
        Figure(
            "fig-pair-tvd",
            "2-way total variation distance per column pair (0 = identical, 1 = disjoint)",
            heatmap(
                list(a.domain.columns),
                [[float(v) for v in row] for row in tvd],
                label="2-way TVD heatmap",
            ),
            "aggregates.parquet (reported DP counts of length 2, normalised per "
            "pair) and synthetic.parquet (the records' 2-way counts, normalised per pair). It "
            "measures how faithfully the synthetic records reproduce the published aggregates.",
        )
    ]


def agreement_figures(inputs: ReportInputs) -> list[Figure]:
    """How the synthetic records follow the DP aggregates, by length: mean error next to the
    noise, the share within the noise's 95% interval, the k-way TVD (``evaluation.json``)."""
    by_length = inputs.evaluation.get("by_length") or {}
    ks = sorted((k for k, e in by_length.items() if e.get("mean_abs_error") is not None), key=int)
    if not ks:
        return []
    ticks = [f"length {k}" for k in ks]
    series = [Series("mean |synthetic − DP|", tuple(by_length[k]["mean_abs_error"] for k in ks))]
    if any(by_length[k].get("noise_sd") is not None for k in ks):
        series.append(
            Series("noise standard deviation", tuple(by_length[k].get("noise_sd") for k in ks))
        )
    out = [
        Figure(
            "fig-error-length",
            "Mean error of the synthetic counts by combination length",
            vbars(ticks, series, label="mean error by length", value_format=lambda v: f"{v:.3g}"),
            "aggregates.parquet and synthetic.parquet (mean absolute difference "
            "between a reported DP count and the synthetic records' count of the same "
            "combination) and manifest.json privacy.noise (the DP noise, for scale); "
            "evaluation.json by_length.",
        )
    ]
    within = [by_length[k].get("within_noise_95_pct") for k in ks]
    if any(v is not None for v in within):
        out.append(
            Figure(
                "fig-within-noise",
                "Synthetic counts within the 95% noise interval of the DP count (%, by length)",
                vbars(
                    ticks,
                    [Series("within ±1.96·σ_k·√Δ_k", tuple(within))],
                    label="share within the noise interval by length",
                    value_format=lambda v: f"{v:.3g}",
                    top_value=100.0,
                ),
                "aggregates.parquet, synthetic.parquet and manifest.json privacy.noise (the "
                "share of reported combinations whose synthetic count differs from the DP count "
                "by at most 1.96 noise standard deviations); evaluation.json by_length.",
            )
        )
    tvd = [by_length[k].get("tvd_mean") for k in ks]
    if any(v is not None for v in tvd):
        out.append(
            Figure(
                "fig-tvd-length",
                "Mean total variation distance of the k-column marginals, synthetic vs DP",
                vbars(
                    ticks,
                    [Series("mean TVD", tuple(tvd))],
                    label="mean TVD by length",
                    value_format=lambda v: f"{v:.3g}",
                    top_value=1.0,
                ),
                "aggregates.parquet (reported DP counts of each set of k columns, normalised) "
                "and synthetic.parquet (the records' counts, normalised); evaluation.json "
                "by_length.",
            )
        )
    return out


def _table(rows: list[tuple[str, str]], head: tuple[str, str]) -> str:
    body = "".join(f"<tr><td>{esc(k)}</td><td>{v}</td></tr>" for k, v in rows)
    return f"<table><tr><th>{esc(head[0])}</th><th>{esc(head[1])}</th></tr>{body}</table>"


def noise_section(inputs: ReportInputs) -> str:
    """The noise of each published count (manifest ``privacy.noise``) and how to read it."""
    noise = inputs.noise
    rows = []
    rc = noise.get("record_count")
    if isinstance(rc, dict):
        rows.append(
            f"<tr><td>record count</td><td>{esc(rc['mechanism'])}</td>"
            f"<td class='num'>scale {num(rc.get('scale'), '.6g')}</td><td></td><td></td>"
            f"<td class='num'>{num(rc.get('noise_sd'), '.4g')}</td></tr>"
        )
    for e in noise.get("by_length") or []:
        rows.append(
            f"<tr><td>length {int(e['length'])}</td><td>{esc(e['mechanism'])}</td>"
            f"<td class='num'>σ {num(e.get('sigma'), '.6g')}</td>"
            f"<td class='num'>{int(e['allowed_sensitivity'])}</td>"
            f"<td class='num'>{num(e.get('threshold'), '.6g') or 'nothing released'}</td>"
            f"<td class='num'>{count_sd(e):.4g}</td></tr>"
        )
    table = (
        "<table><tr><th>counts</th><th>mechanism</th><th class='num'>noise scale</th>"
        "<th class='num'>allowed sensitivity Δ</th><th class='num'>threshold</th>"
        "<th class='num'>noise standard deviation</th></tr>" + "".join(rows) + "</table>"
        if rows
        else ""
    )
    return (
        "<h3>Noise of each published count</h3>"
        + table
        + f"<p>{esc(noise.get('how_to_read', ''))}</p>"
    )


def details_section(inputs: ReportInputs) -> str:
    """Key parameters, the spend table, the artifacts with their sha256, all parameters."""
    m = inputs.manifest
    params = m.get("parameters", {})
    keys = ("epsilon", "delta", "reporting_length", "synthesizer", "percentile_percentage")
    spend = "".join(
        f"<tr><td>{esc(s['stage'])}</td><td>{esc(s['mechanism'])}</td>"
        f'<td class="num">{s["epsilon"]:.6g}</td><td class="num">{s["delta"]:.3g}</td>'
        f'<td class="num">{"" if s.get("rho") is None else format(s["rho"], ".6g")}</td></tr>'
        for s in m["privacy"].get("stages") or []
    )
    artifacts = _table(
        [(n, f'<span class="hash">{esc(h)}</span>') for n, h in sorted(m["artifacts"].items())],
        ("artifact", "sha256"),
    )
    return (
        "<h2 id='details'>Details</h2><h3>Parameters</h3>"
        + _table([(k, esc(params.get(k))) for k in keys if k in params], ("parameter", "value"))
        + "<h3>Privacy spend by stage</h3><table><tr><th>stage</th><th>mechanism</th>"
        "<th class='num'>ε</th><th class='num'>δ</th><th class='num'>ρ (zCDP)</th></tr>"
        + spend
        + "</table>"
        + noise_section(inputs)
        + "<h3>Files of this release</h3>"
        + artifacts
        + "<p class='meta'>report.html, explorer.html and manifest.json are listed in the "
        "manifest with their sha256; <code>sds audit --verify</code> checks them.</p>"
        + "<details><summary>All parameters (JSON)</summary><pre>"
        + esc(json.dumps(params, indent=2, sort_keys=True, default=str))
        + "</pre></details>"
    )


def report_html(inputs: ReportInputs) -> bytes:
    """The whole report as UTF-8 HTML (deterministic for the same inputs)."""
    m = inputs.manifest
    sections: list[tuple[str, str, Callable[[ReportInputs], list[Figure]], str]] = [
        ("privacy", "Privacy: spend and noise", privacy_figures, ""),
        (
            "distributions",
            "Each column: DP aggregates vs synthetic records",
            distribution_figures,
            column_warning_notes(inputs) + unpublished_columns(inputs),
        ),
        ("pairs", "Column pairs", pair_figure, ""),
        (
            "agreement",
            "Agreement of the synthetic records with the DP aggregates",
            agreement_figures,
            "<p>Computed from the published files only (also in evaluation.json), so covered by "
            "the release's guarantee. How the release compares with the sensitive data is "
            "measured in the custodian's private report and is never published.</p>",
        ),
    ]
    body, toc, number = [], [], 0
    for sid, title, build, intro in sections:
        figs = build(inputs)
        if figs or intro:
            toc.append(f"<li><a href='#{sid}'>{esc(title)}</a></li>")
            html = []
            for fig in figs:
                number += 1
                html.append(fig.html(number))
            body.append(f"<h2 id='{sid}'>{esc(title)}</h2>{intro}{''.join(html)}")
    rid, created = esc(m["release_id"]), esc(m.get("created_at", ""))
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>DP release {rid}</title><style>{template('report.css')}</style></head><body>"
        + not_private_banner(m)  # a seeded release says so first
        + f"<h1>DP release {rid}</h1><p class='meta'>Dataset {esc(m['dataset'])} · created "
        f"{created} · <a href='explorer.html'>open the aggregate explorer</a></p>"
        + summary(inputs)
        + f"<nav class='toc'><ul>{''.join(toc)}<li><a href='#details'>Details</a></li></ul></nav>"
        + "".join(body)
        + details_section(inputs)
        + "</body></html>"
    ).encode("utf-8")
