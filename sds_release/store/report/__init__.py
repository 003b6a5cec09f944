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
    "CUSTODIAN_EVALUATION": "sds_release.store.report.custodian",
    "CUSTODIAN_REPORT": "sds_release.store.report.custodian",
    "agreement_figures": "sds_release.store.report.page",
    "BudgetSnapshot": "sds_release.store.report.inputs",
    "CSP": "sds_release.store.report.page",
    "Figure": "sds_release.store.report.page",
    "MAX_VALUES": "sds_release.store.report.page",
    "PALETTE": "sds_release.store.report.charts",
    "ReportInputs": "sds_release.store.report.inputs",
    "Series": "sds_release.store.report.charts",
    "TOP_ROWS": "sds_release.store.report.explorer",
    "WIDTH": "sds_release.store.report.charts",
    "budget_snapshot": "sds_release.store.report.inputs",
    "count_sd": "sds_release.store.report.inputs",
    "custodian_report_html": "sds_release.store.report.custodian",
    "details_section": "sds_release.store.report.page",
    "distribution_figures": "sds_release.store.report.page",
    "esc": "sds_release.store.report.charts",
    "evaluation_json": "sds_release.store.report.custodian",
    "explorer_html": "sds_release.store.report.explorer",
    "write_explorer": "sds_release.store.report.explorer",
    "fmt_number": "sds_release.store.report.charts",
    "gather": "sds_release.store.report.inputs",
    "hbars": "sds_release.store.report.charts",
    "heatmap": "sds_release.store.report.charts",
    "laplace_half_width": "sds_release.store.report.inputs",
    "nice_ticks": "sds_release.store.report.charts",
    "noise_section": "sds_release.store.report.page",
    "pair_figure": "sds_release.store.report.page",
    "payload": "sds_release.store.report.explorer",
    "privacy_figures": "sds_release.store.report.page",
    "recorded_noise": "sds_release.store.report.inputs",
    "report_html": "sds_release.store.report.page",
    "sd_by_len": "sds_release.store.report.inputs",
    "stacked": "sds_release.store.report.charts",
    "summary": "sds_release.store.report.page",
    "template": "sds_release.store.report.page",
    "timing_figure": "sds_release.store.report.custodian",
    "budget_section": "sds_release.store.report.custodian",
    "unpublished_columns": "sds_release.store.report.page",
    "utility_figures": "sds_release.store.report.custodian",
    "vbars": "sds_release.store.report.charts",
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
    from sds_release.store.report.charts import (
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
    from sds_release.store.report.custodian import (
        CUSTODIAN_EVALUATION,
        CUSTODIAN_REPORT,
        budget_section,
        custodian_report_html,
        evaluation_json,
        timing_figure,
        utility_figures,
    )
    from sds_release.store.report.explorer import TOP_ROWS, explorer_html, payload, write_explorer
    from sds_release.store.report.inputs import (
        BudgetSnapshot,
        ReportInputs,
        budget_snapshot,
        count_sd,
        gather,
        laplace_half_width,
        recorded_noise,
        sd_by_len,
    )
    from sds_release.store.report.page import (
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
