"""``custodian-report.html``: the release measured against the sensitive data, for the custodian.

SDS's evaluation (count preservation, suppressed and fabricated shares, TVD against the input,
risks; with ``privacy_risk`` anonymeter's attack-based risks beside the DP guarantee) reads
the sensitive data, so it is not covered by the release's guarantee and is never published:
the publish stage writes this page and the full evaluation as JSON into the private workspace
(``private/<release-id>/``, mode 0600), beside the public report. The page also holds what
the public files leave out because it is not DP or reveals other releases: the warnings
computed from the data (the "0" cells SDS empties, with their shares), the dataset's budget
before and after the release (from the ledger), and the time of every stage (most follow the
data). Built with the public report's charts; the figures read the full evaluation (JSON form,
string keys).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from sds_release.store.report.charts import (
    Series,
    delta_text,
    eps_text,
    esc,
    hbars,
    num,
    stacked,
    vbars,
)
from sds_release.store.report.inputs import BudgetSnapshot
from sds_release.store.report.page import CSP, Figure, template

__all__ = [
    "CUSTODIAN_EVALUATION",
    "CUSTODIAN_REPORT",
    "budget_section",
    "custodian_report_html",
    "evaluation_json",
    "timing_figure",
    "utility_figures",
]

CUSTODIAN_REPORT = "custodian-report.html"
"""The custodian report's file name in ``private/<release-id>/``."""
CUSTODIAN_EVALUATION = "custodian-evaluation.json"
"""The full evaluation's file name in ``private/<release-id>/``."""

_WARNING = (
    "PRIVATE: computed from the sensitive data. These metrics are not differentially private "
    "and are not covered by the release's guarantee (e.g. the suppressed and fabricated shares "
    "together give the number of distinct combinations in the data). Never publish or share "
    "them; the public report and evaluation.json are computed from the published files only."
)
_SOURCE = (
    "the evaluation stage's comparison of the release with the sensitive data "
    f"({CUSTODIAN_EVALUATION}, private; not differentially private)."
)
_SECTIONS = (
    ("sensitive_vs_dp_aggregates", "DP aggregates"),
    ("sensitive_vs_synthetic", "synthetic"),
)


def evaluation_json(evaluation: dict[str, Any]) -> dict[str, Any]:
    """The evaluation as JSON values (string keys, plain numbers), as the private file holds it."""
    import numpy as np

    def plain(x: Any) -> Any:
        if isinstance(x, np.generic):
            return x.item()
        raise TypeError(f"not JSON: {type(x).__name__}")

    out: dict[str, Any] = json.loads(json.dumps(evaluation, default=plain))
    return out


def _get(d: Any, key: str) -> float | None:
    return float(d[key]) if isinstance(d, dict) and d.get(key) is not None else None


def _keys(ev: dict[str, Any], key: str, order: Any) -> list[str]:
    """The keys of ``ev[section][key]`` over both sections, sorted numerically by ``order``."""
    return sorted({k for s, _ in _SECTIONS for k in ((ev.get(s) or {}).get(key) or {})}, key=order)


def _preservation_figure(
    ev: dict[str, Any], key: str, keys: list[str], ticks: list[str], fig_id: str, title: str
) -> Figure:
    """Bars of SDS's preservation ratio (``ev[section][key][k]``) per k, one series a section."""
    series = [
        Series(
            name,
            tuple(
                _get(((ev.get(s) or {}).get(key) or {}).get(k), "count_preservation") for k in keys
            ),
        )
        for s, name in _SECTIONS
    ]
    chart = vbars(ticks, series, label=title, value_format=lambda v: f"{v:.2f}", top_value=1.0)
    return Figure(fig_id, title, chart, _SOURCE)


def utility_figures(ev: dict[str, Any]) -> list[Figure]:
    """SDS's preservation by count bucket and by length, suppressed and fabricated shares."""
    out = []
    buckets = _keys(ev, "preservation_by_count", float)
    if buckets:
        out.append(
            _preservation_figure(
                ev, "preservation_by_count", buckets, [f"≤{b}" for b in buckets],
                "fig-preservation-count",
                "Count preservation by count bucket (1 = counts preserved)",
            )
        )  # fmt: skip
    lengths = _keys(ev, "preservation_by_length", int)
    if lengths:
        out.append(
            _preservation_figure(
                ev, "preservation_by_length", lengths, [f"length {k}" for k in lengths],
                "fig-preservation-length", "Count preservation by combination length",
            )
        )  # fmt: skip
        shares = (
            ("suppressed", "Suppressed: sensitive combinations missing from the release"),
            ("fabricated", "Fabricated: released combinations absent from the sensitive data"),
        )
        for title, caption in shares:
            field = f"{title}_pct"
            series = [
                Series(
                    f"{n} {title}",
                    tuple(
                        _get(((ev.get(s) or {}).get("by_length") or {}).get(k), field)
                        for k in lengths
                    ),
                )
                for s, n in _SECTIONS
            ]
            out.append(
                Figure(
                    f"fig-{title}",
                    f"{caption} (%, by length)",
                    vbars(
                        [f"length {k}" for k in lengths],
                        series,
                        label=f"{title} share by length",
                        value_format=lambda v: f"{v:.3g}",
                    ),
                    _SOURCE,
                )
            )
    return out


def _headline(ev: dict[str, Any]) -> str:
    """One table of the headline ratios per length: TVD, preservation, suppressed, fabricated."""
    mf = ev.get("marginal_fidelity") or {}
    orders = sorted({*(mf.get("tvd_mean_by_order") or {}), *_keys(ev, "by_length", int)}, key=int)
    if not orders:
        return "<p>This release has no evaluation against the sensitive data.</p>"
    head = (
        "<tr><th>length</th><th class='num'>mean TVD vs the data</th>"
        "<th class='num'>max TVD</th>"
        + "".join(
            f"<th class='num'>{esc(n)}: preservation</th><th class='num'>suppressed %</th>"
            f"<th class='num'>fabricated %</th>"
            for _, n in _SECTIONS
        )
        + "</tr>"
    )
    rows = []
    for k in orders:
        cells = [
            num((mf.get("tvd_mean_by_order") or {}).get(k)),
            num((mf.get("tvd_max_by_order") or {}).get(k)),
        ]
        for s, _ in _SECTIONS:
            sec = ev.get(s) or {}
            pres = (sec.get("preservation_by_length") or {}).get(k)
            cells.append(num(_get(pres, "count_preservation")))
            by = (sec.get("by_length") or {}).get(k)
            cells += [num(_get(by, "suppressed_pct")), num(_get(by, "fabricated_pct"))]
        rows.append(
            f"<tr><td>{esc(k)}</td>" + "".join(f"<td class='num'>{c}</td>" for c in cells) + "</tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


_RISKS = (
    ("singling out (one attribute)", ("singling_out", "univariate")),
    ("singling out (several attributes)", ("singling_out", "multivariate")),
    ("linkability", ("linkability",)),
    ("attribute inference (worst column)", ("inference_max",)),
)


def _risk_section(manifest: dict[str, Any], risk: dict[str, Any] | None) -> str:
    """anonymeter's risks (``evaluation["privacy_risk"]``) beside the release's DP guarantee;
    empty when the release ran without ``privacy_risk``."""
    if not risk:
        return ""
    p = manifest.get("privacy") or {}
    rec, par = risk["records"], risk["params"]
    rows = []
    for name, path in _RISKS:
        r: Any = risk
        for key in path:
            r = r[key]
        lo, hi = r["ci"]
        what = esc(name + (f": {r['secret']}" if "secret" in r else ""))
        note = "" if r["informative"] else "no better than random guessing: no evidence"
        rows.append(
            f"<tr><td>{what}</td><td class='num'>{r['risk']:.3f}</td>"
            f"<td class='num'>[{lo:.3f}, {hi:.3f}]</td><td>{esc(note)}</td></tr>"
        )
    return (
        "<h2 id='privacy-risk'>Attack-based privacy risk of the synthetic records</h2>"
        f"<p><b>The guarantee:</b> the release is (ε = {num(p.get('epsilon'))}, "
        f"δ = {num(p.get('delta'))})-differentially private with respect to its training part. "
        "<b>Beside it, an empirical measure (NOT DP, not a replacement):</b> anonymeter "
        f"{esc(risk['anonymeter'])}'s attacks on the {rec['synthetic']} synthetic records, run on "
        f"the {rec['training']} training records and on {rec['control']} control records held "
        f"back before the release ({par['held_back']:.0%} of the input, never released; "
        f"private/&lt;release-id&gt;/control.parquet). A risk is anonymeter's residual risk, "
        "(attack − control) / (1 − control): how much better the attacks do on the records "
        f"the synthesizer saw, with its {par['confidence_level']:.0%} interval; "
        f"{par['n_attacks']} attacks each.</p>"
        "<table><tr><th>attack</th><th class='num'>risk</th><th class='num'>interval</th>"
        f"<th></th></tr>{''.join(rows)}</table>"
    )


def budget_section(budget: BudgetSnapshot | None) -> tuple[str, list[Figure]]:
    """The dataset's (or the period's) budget before and after the release, from the ledger
    at publication: a paragraph and the budget bar. Not published: "before" and "after" show
    what the dataset's other releases spent, refused or failed ones included."""
    b = budget
    if b is None:
        return "", []
    if b.period is not None:
        text = (
            f"<p><b>Period {esc(b.period)}:</b> this release holds only the rows of period "
            f"<b>{esc(b.period)}</b> and is paid from that period's own budget, ε = "
            f"{eps_text(b.epsilon_lifetime)} (δ = {delta_text(b.delta_lifetime)}) per period "
            f"(periods hold disjoint records: parallel composition). Before this release ε = "
            f"{eps_text(b.epsilon_before)} of it was left; this release spent ε = "
            f"{eps_text(b.epsilon_release)} (δ = {delta_text(b.delta_release)}); ε = "
            f"{eps_text(b.epsilon_after)} (δ = {delta_text(b.delta_after)}) remains for this "
            "period (from the ledger, at publication time).</p>"
        )
    else:
        text = (
            f"<p><b>Privacy budget of the dataset:</b> lifetime ε = {eps_text(b.epsilon_lifetime)} "
            f"(δ = {delta_text(b.delta_lifetime)}). Before this release ε = "
            f"{eps_text(b.epsilon_before)} was left; this release spent ε = "
            f"{eps_text(b.epsilon_release)} (δ = {delta_text(b.delta_release)}); "
            f"ε = {eps_text(b.epsilon_after)} (δ = {delta_text(b.delta_after)}) remains for future "
            "releases (from the ledger, at publication time).</p>"
        )
    figure = Figure(
        "fig-budget",
        "Lifetime budget of the dataset (ε)"
        if b.period is None
        else f"Budget of period {b.period} (ε)",
        stacked(
            [
                ("spent or held before", b.epsilon_spent_before),
                ("this release", b.epsilon_release),
                ("left after", max(b.epsilon_after, 0.0)),
            ],
            label="lifetime privacy budget",
            value_format=eps_text,
        ),
        "the privacy-budget ledger (lifetime budget, charges and open reservations of the "
        "dataset) when the release was published.",
    )
    return text, [figure]


def timing_figure(stages: Sequence[dict[str, Any]]) -> list[Figure]:
    """Seconds per stage of the run (the private timeline: every stage's wall-clock time)."""
    secs = [(s.get("name"), s.get("duration_s")) for s in stages if isinstance(s, dict)]
    shown = [(str(n), float(v)) for n, v in secs if isinstance(v, int | float)]
    if not shown:
        return []
    return [
        Figure(
            "fig-timing",
            "Time per stage (seconds)",
            hbars(
                [n for n, _ in shown],
                [Series("seconds", tuple(v for _, v in shown))],
                label="seconds per stage",
                value_format=lambda v: f"{v:.3g}",
            ),
            "the run's private timeline (private/<release-id>/timeline.json: wall-clock time "
            "of each stage; not published, most stages take a time that follows the data).",
        )
    ]


def custodian_report_html(
    manifest: dict[str, Any],
    evaluation: dict[str, Any],
    public_report: str,
    *,
    budget: BudgetSnapshot | None = None,
    stages: Sequence[dict[str, Any]] = (),
    warnings: Sequence[str] = (),
) -> bytes:
    """The custodian report as UTF-8 HTML (deterministic for the same inputs).

    Args:
        manifest: the release's manifest (release id, dataset, creation time).
        evaluation: the full evaluation (:func:`evaluation_json` form).
        public_report: the path of the public report.html, relative to this page.
        budget: the dataset's budget around the release (None: no ledger budget).
        stages: the run's full stage records (start, finish, ``duration_s``).
        warnings: warnings computed from the sensitive data (e.g. the "0" cells).
    """
    rid = esc(manifest["release_id"])
    budget_text, budget_figures = budget_section(budget)
    numbers = itertools.count(1)
    figures, budget_html, timing_html = (
        "".join(f.html(next(numbers)) for f in figs)
        for figs in (utility_figures(evaluation), budget_figures, timing_figure(stages))
    )
    notes = "".join(f"<p class='note warning'>{esc(w)}</p>" for w in warnings)
    full = json.dumps(evaluation, indent=2, sort_keys=True)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Custodian report of release {rid} (private)</title>"
        f"<style>{template('report.css')}</style></head><body>"
        f"<h1>Custodian report of release {rid}</h1>"
        f"<p class='warn'><b>{esc(_WARNING)}</b></p>"
        f"<p class='meta'>Dataset {esc(manifest['dataset'])} · created "
        f"{esc(manifest.get('created_at', ''))} · <a href='{esc(public_report)}'>the public "
        "report</a></p>"
        + ("<h2 id='input-warnings'>Warnings about the input</h2>" + notes if warnings else "")
        + "<h2 id='utility'>Utility against the sensitive data (SDS evaluation)</h2>"
        + _headline(evaluation)
        + figures
        + _risk_section(manifest, evaluation.get("privacy_risk"))
        + ("<h2 id='budget'>Privacy budget</h2>" + budget_text + budget_html if budget else "")
        + ("<h2 id='timing'>How long it took</h2>" + timing_html if timing_html else "")
        + "<details><summary>The full evaluation (JSON)</summary><pre>"
        + esc(full)
        + "</pre></details></body></html>"
    ).encode("utf-8")
