"""What a person reads: report.html and explorer.html, built from published values only, and
the custodian's private report.

- ``page``: ``report.html``;
- ``explorer``: ``explorer.html``;
- ``custodian``: ``custodian-report.html`` (private: the evaluation against the sensitive data,
  the warnings counted from it, the dataset's budget around the release, every stage time);
- ``inputs``: the published values the report and explorer are built from;
- ``charts``: inline SVG charts;
- ``offline``: what every generated page shares (the CSP, the shipped templates).

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "CUSTODIAN_EVALUATION": "release_store.report.custodian",
    "CUSTODIAN_REPORT": "release_store.report.custodian",
    "agreement_figures": "release_store.report.page",
    "BudgetSnapshot": "release_store.report.inputs",
    "CSP": "release_store.report.page",
    "Figure": "release_store.report.page",
    "MAX_VALUES": "release_store.report.page",
    "PALETTE": "release_store.report.charts",
    "ReportInputs": "release_store.report.inputs",
    "Series": "release_store.report.charts",
    "TOP_ROWS": "release_store.report.explorer",
    "WIDTH": "release_store.report.charts",
    "budget_snapshot": "release_store.report.inputs",
    "count_sd": "release_store.report.inputs",
    "custodian_report_html": "release_store.report.custodian",
    "details_section": "release_store.report.page",
    "distribution_figures": "release_store.report.page",
    "esc": "release_store.report.charts",
    "evaluation_json": "release_store.report.custodian",
    "explorer_html": "release_store.report.explorer",
    "write_explorer": "release_store.report.explorer",
    "fmt_number": "release_store.report.charts",
    "gather": "release_store.report.inputs",
    "hbars": "release_store.report.charts",
    "heatmap": "release_store.report.charts",
    "laplace_half_width": "release_store.report.inputs",
    "nice_ticks": "release_store.report.charts",
    "noise_section": "release_store.report.page",
    "pair_figure": "release_store.report.page",
    "payload": "release_store.report.explorer",
    "privacy_figures": "release_store.report.page",
    "recorded_noise": "release_store.report.inputs",
    "report_html": "release_store.report.page",
    "sd_by_len": "release_store.report.inputs",
    "stacked": "release_store.report.charts",
    "summary": "release_store.report.page",
    "template": "release_store.report.page",
    "timing_figure": "release_store.report.custodian",
    "budget_section": "release_store.report.custodian",
    "unpublished_columns": "release_store.report.page",
    "utility_figures": "release_store.report.custodian",
    "vbars": "release_store.report.charts",
}

__all__ = [
    "CSP",
    "CUSTODIAN_EVALUATION",
    "CUSTODIAN_REPORT",
    "MAX_VALUES",
    "PALETTE",
    "TOP_ROWS",
    "WIDTH",
    "BudgetSnapshot",
    "Figure",
    "ReportInputs",
    "Series",
    "agreement_figures",
    "budget_section",
    "budget_snapshot",
    "count_sd",
    "custodian_report_html",
    "details_section",
    "distribution_figures",
    "esc",
    "evaluation_json",
    "explorer_html",
    "fmt_number",
    "gather",
    "hbars",
    "heatmap",
    "laplace_half_width",
    "nice_ticks",
    "noise_section",
    "pair_figure",
    "payload",
    "privacy_figures",
    "recorded_noise",
    "report_html",
    "sd_by_len",
    "stacked",
    "summary",
    "template",
    "timing_figure",
    "unpublished_columns",
    "utility_figures",
    "vbars",
    "write_explorer",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from release_store.report.charts import (
        PALETTE,
        WIDTH,
        Series,
        esc,
        fmt_number,
        hbars,
        heatmap,
        nice_ticks,
        stacked,
        vbars,
    )
    from release_store.report.custodian import (
        CUSTODIAN_EVALUATION,
        CUSTODIAN_REPORT,
        budget_section,
        custodian_report_html,
        evaluation_json,
        timing_figure,
        utility_figures,
    )
    from release_store.report.explorer import TOP_ROWS, explorer_html, payload, write_explorer
    from release_store.report.inputs import (
        BudgetSnapshot,
        ReportInputs,
        budget_snapshot,
        count_sd,
        gather,
        laplace_half_width,
        recorded_noise,
        sd_by_len,
    )
    from release_store.report.page import (
        CSP,
        MAX_VALUES,
        Figure,
        agreement_figures,
        details_section,
        distribution_figures,
        noise_section,
        pair_figure,
        privacy_figures,
        report_html,
        summary,
        template,
        unpublished_columns,
    )
