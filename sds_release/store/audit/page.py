"""The audit page (``sds audit --report``): a home's audit trail as one private, offline HTML page.

Every release and refused attempt (:class:`~sds_release.store.audit.trail.AuditTrail`) with who or
what started it, its state, what it spent against which budget and whether it verifies now;
each dataset's budget as ``sds budget show`` prints it; ε charged over time per dataset (inline
SVG). No script and nothing loaded from anywhere (the release pages' CSP). Private: it names
inputs, runs, deployments and users, so it is written under ``$SDS_HOME/private/_audit/`` by
default, never next to a release.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from sds_release.store.audit.journal import AUDIT_DIR
from sds_release.store.audit.trail import AuditTrail, DatasetTotals, TrailEntry
from sds_release.store.report.charts import PALETTE, WIDTH, esc, nice_ticks, num
from sds_release.store.report.offline import CSP, template
from sds_release.store.workspace.files import atomic_write_text
from sds_release.store.workspace.home import validate_id

__all__ = ["BUDGET_COLUMNS", "audit_page_html", "default_report_path", "write_audit_page"]

BUDGET_COLUMNS = (
    "dataset",
    "period",
    "budget",
    "ε spent",
    "ε reserved",
    "ε left",
    "δ left",
    "runway",
    "per-release policy",
)
"""The columns of ``sds budget show``, which the page's budget tables repeat."""

_STYLE = """
.private { background: #fde8e8; border-left: 4px solid #c0392b; padding: .5em .8em;
           font-weight: bold; }
body { max-width: 72em; }
td.state-refused { color: #8a5a00; } td.state-failed, td.bad { color: #b00020; }
td.ok { color: #1e7b34; }
td.small, .small { font-size: .8em; color: #555; }
"""


def default_report_path(home: str | Path, dataset: str | None = None) -> Path:
    """``$SDS_HOME/private/_audit/audit-report.html`` (one dataset: ``audit-report-<id>.html``)."""
    name = "audit-report.html" if dataset is None else f"audit-report-{validate_id(dataset)}.html"
    return Path(home) / "private" / AUDIT_DIR / name


def _time(text: str | None) -> str:
    return "" if not text else text[:19].replace("T", " ") + " UTC"


def _budget_cell(t: TrailEntry) -> str:
    if t.epsilon_before is None:
        return "<td class='small'>no budget recorded</td>"
    scope = f"period {esc(t.period)}" if t.period else "lifetime"
    return (
        f"<td class='num' data-epsilon-before='{t.epsilon_before:.12g}' "
        f"data-epsilon-after='{t.epsilon_after:.12g}'>ε {t.epsilon_before:.6g} → "
        f"{t.epsilon_after:.6g}<br><span class='small'>δ {num(t.delta_before, '.3g')} → "
        f"{num(t.delta_after, '.3g')} ({scope})</span></td>"
    )


def _entry_row(t: TrailEntry) -> str:
    later = "".join(f"<br><span class='small'>resumed: {esc(r)}</span>" for r in t.later_runs)
    detail = ""
    if t.reason:
        detail = f"<br><span class='small'>{esc(t.reason)}</span>"
    elif t.problems:
        detail = "".join(f"<br><span class='small'>{esc(p)}</span>" for p in t.problems)
    spent = f"{t.epsilon_spent:.6g}" + (" (holds the rest)" if t.held else "")
    verified = "ok" if t.verification == "ok" else "bad" if "problem" in t.verification else ""
    signed = (
        f"<br><span class='small'>signed {esc(t.signed_by[:19])}…</span>" if t.signed_by else ""
    )
    return (
        f"<tr class='release' data-release='{esc(t.release_id)}' data-dataset='{esc(t.dataset)}' "
        f"data-state='{esc(t.state)}' data-runs='{t.runs}' "
        f"data-epsilon-spent='{t.epsilon_spent:.12g}' data-delta-spent='{t.delta_spent:.12g}'>"
        f"<td><code>{esc(t.release_id)}</code></td><td>{esc(t.dataset)}</td>"
        f"<td>{esc(t.period or '-')}</td><td class='small'>{esc(_time(t.started_at))}</td>"
        f"<td>{esc(t.origin)}{later}</td>"
        f"<td class='state-{esc(t.state)}'>{esc(t.state_text)}{detail}</td>"
        f"<td class='num'>{num(t.epsilon_asked, '.6g')}</td><td class='num'>{esc(spent)}</td>"
        f"<td class='num'>{t.delta_spent:.3g}</td>{_budget_cell(t)}"
        f"<td class='{verified}'>{esc(t.verification)}{signed}</td></tr>"
    )


def _totals(d: DatasetTotals) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in BUDGET_COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in d.rows
    )
    ledger_total = d.epsilon_spent + d.epsilon_reserved
    agree = abs(d.entries_epsilon - ledger_total) <= 1e-9 * max(1.0, ledger_total)
    check = (
        "<span class='ok'>equal</span>"
        if agree
        else "<span class='bad'>DIFFERENT: the ledger holds spends this page does not list</span>"
    )
    return (
        f"<h3>{esc(d.dataset)}</h3><table class='budget' data-dataset='{esc(d.dataset)}' "
        f"data-epsilon-spent='{d.epsilon_spent:.12g}' "
        f"data-epsilon-reserved='{d.epsilon_reserved:.12g}' "
        f"data-epsilon-left='{d.epsilon_remaining:.12g}' "
        f"data-delta-left='{d.delta_remaining:.12g}' "
        f"data-entries-epsilon='{d.entries_epsilon:.12g}'><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table><p class='small'>The releases listed below spent or hold "
        f"ε {d.entries_epsilon:.6g} in all; the ledger counts ε {ledger_total:.6g} spent and "
        f"reserved: {check}.</p>"
    )


def _chart(datasets: tuple[DatasetTotals, ...]) -> str:
    """ε charged (spent, or held by an unfinished release) over time, one step line per
    dataset; every reservation is a point (``class="mark"``) with its tooltip."""
    points = [(d.dataset, datetime.fromisoformat(at), eps) for d in datasets for at, eps in d.curve]
    if not points:
        return "<p class='small'>No release has reserved anything yet.</p>"
    t0 = min(p[1] for p in points).timestamp()
    t1 = max(p[1] for p in points).timestamp()
    span = max(t1 - t0, 1.0)
    ticks = nice_ticks(max(p[2] for p in points))
    top = ticks[-1] or 1.0
    left, right, top_pad, height = 56, 24, 20, 220

    def x(t: float) -> float:
        return left + (t - t0) / span * (WIDTH - left - right)

    def y(v: float) -> float:
        return top_pad + (1 - v / top) * (height - top_pad - 30)

    out = [
        f"<svg viewBox='0 0 {WIDTH} {height}' class='chart-svg' role='img' "
        "aria-label='ε charged over time per dataset'>"
    ]
    for v in ticks:
        out.append(
            f"<line class='grid' x1='{left}' x2='{WIDTH - right}' y1='{y(v):.1f}' "
            f"y2='{y(v):.1f}'/><text class='tick' x='{left - 6}' y='{y(v) + 3:.1f}' "
            f"text-anchor='end'>{v:g}</text>"
        )
    for i, d in enumerate(datasets):
        colour = PALETTE[i % len(PALETTE)]
        pts = [(datetime.fromisoformat(at).timestamp(), eps) for at, eps in d.curve]
        if not pts:
            continue
        path, prev = [f"M{x(pts[0][0]):.1f},{y(0):.1f}"], 0.0
        for t, eps in pts:
            path.append(f"L{x(t):.1f},{y(prev):.1f} L{x(t):.1f},{y(eps):.1f}")
            prev = eps
        out.append(f"<path d='{' '.join(path)}' fill='none' stroke='{colour}' stroke-width='2'/>")
        for (at, eps), (t, _) in zip(d.curve, pts, strict=True):
            out.append(
                f"<circle class='mark' data-dataset='{esc(d.dataset)}' cx='{x(t):.1f}' "
                f"cy='{y(eps):.1f}' r='3.5' fill='{colour}'><title>{esc(d.dataset)}: ε "
                f"{eps:.6g} charged by {esc(_time(at))}</title></circle>"
            )
        out.append(
            f"<text class='legend' x='{left + 4 + 150 * i}' y='12' fill='{colour}'>■ "
            f"{esc(d.dataset)}</text>"
        )
    first, last = (_time(f(p[1] for p in points).isoformat()) for f in (min, max))
    out.append(
        f"<text class='tick' x='{left}' y='{height - 8}'>{esc(first)}</text>"
        f"<text class='tick' x='{WIDTH - right}' y='{height - 8}' text-anchor='end'>"
        f"{esc(last)}</text></svg>"
    )
    return "".join(out)


def audit_page_html(trail: AuditTrail) -> str:
    """The audit page of ``trail`` as HTML text."""
    what = f"dataset {esc(trail.dataset)} of the home" if trail.dataset else "the home"
    if trail.ledger_ok is None:
        chain = "no ledger"
    elif trail.ledger_ok:
        chain = f"<span class='ok'>intact</span> ({trail.ledger_rows} rows)"
    else:
        chain = "<span class='bad'>BROKEN</span>: " + "; ".join(
            esc(p) for p in trail.ledger_problems
        )
    header = (
        "<tr><th>release</th><th>dataset</th><th>period</th><th>started</th><th>started by</th>"
        "<th>state</th><th class='num'>ε asked</th><th class='num'>ε spent</th>"
        "<th class='num'>δ spent</th><th>budget left before → after</th>"
        "<th>verified now</th></tr>"
    )
    rows = "".join(_entry_row(t) for t in trail.entries)
    budgets = "".join(_totals(d) for d in trail.datasets) or "<p>No budget set.</p>"
    problems = (
        "<p class='ok'>No problem found: the ledger chain, every release's files and signature "
        "and every manifest against the ledger check.</p>"
        if not trail.problems and trail.ledger_ok is not False
        else "<ul class='problems'>"
        + "".join(f"<li class='bad'>{esc(p)}</li>" for p in trail.problems)
        + "</ul>"
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Audit trail: {esc(trail.home)}</title>"
        f"<style>{template('report.css')}{_STYLE}</style></head><body>"
        "<p class='private' role='alert'>PRIVATE: this page names inputs, runs, deployments "
        "and users of the home. Keep it with the home's private files; never publish it.</p>"
        f"<h1>Audit trail</h1><p class='meta'>Every release of {what} <code>{esc(trail.home)}"
        f"</code>, checked at {esc(_time(trail.generated_at))} · ledger "
        f"<code>{esc(trail.ledger_url or '-')}</code>: hash chain {chain}</p>"
        "<p class='note'>Spends and budgets are the ledger's. <em>Budget left before → after"
        "</em> adds up the dataset's releases (a per-period dataset: the period's) in the order "
        "they were reserved, each with what it finally spent (an unfinished one: what it still "
        "holds), against the budget set at the time; a refused release spent nothing. "
        "<em>Verified now</em> is what <code>sds audit --verify</code> finds at the time above: "
        "the release's files against its manifest, its signature against the home's keys, its "
        "manifest against the ledger.</p>"
        f"<h2>Budgets now</h2>{budgets}"
        "<h2>ε charged over time</h2><figure class='chart' id='fig-epsilon'>"
        f"{_chart(trail.datasets)}<p class='source'>Each point is a release's reservation; the "
        "line adds up what the dataset's releases spent (or still hold), all periods "
        "together.</p></figure>"
        f"<h2>Releases ({len(trail.entries)})</h2><table id='releases'><thead>{header}</thead>"
        f"<tbody>{rows}</tbody></table><h2>Problems</h2>{problems}</body></html>"
    )


def write_audit_page(trail: AuditTrail, out: str | Path | None = None) -> Path:
    """Write the page (0600) to ``out`` (default :func:`default_report_path`); returns it."""
    path = Path(out) if out is not None else default_report_path(trail.home, trail.dataset)
    return atomic_write_text(path, audit_page_html(trail), private=True)
