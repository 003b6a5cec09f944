"""custodian-report.html: the evaluation against the sensitive data, for the custodian only."""

from __future__ import annotations

import html
import re

import numpy as np

from sds_release.store.report.custodian import custodian_report_html, evaluation_json
from sds_release.store.report.inputs import BudgetSnapshot

EVALUATION = {
    "differentially_private": False,
    "marginal_fidelity": {"tvd_mean_by_order": {1: 0.05, 2: 0.1}, "tvd_max_by_order": {1: 0.2}},
    **{
        section: {
            "by_length": {1: {"suppressed_pct": 1.0, "fabricated_pct": 0.0}, 2: {}},
            "preservation_by_count": {
                10: {"count_preservation": np.float64(0.5)},
                20: {"count_preservation": 0.8},
            },
            "preservation_by_length": {
                1: {"count_preservation": 0.99},
                2: {"count_preservation": 0.9},
            },
        }
        for section in ("sensitive_vs_dp_aggregates", "sensitive_vs_synthetic")
    },
}
MANIFEST = {"release_id": "rel-1", "dataset": "demo", "created_at": "2026-11-23T00:00:00Z"}


def _page() -> str:
    ev = evaluation_json(EVALUATION)
    return custodian_report_html(MANIFEST, ev, "../../releases/demo/rel-1/report.html").decode()


def test_evaluation_json_has_string_keys_and_plain_numbers() -> None:
    """The checkpoint's int keys and numpy numbers become what the private JSON file holds."""
    ev = evaluation_json(EVALUATION)
    pres = ev["sensitive_vs_synthetic"]["preservation_by_count"]
    assert list(pres) == ["10", "20"] and type(pres["10"]["count_preservation"]) is float


def test_custodian_report_draws_the_sds_utility_figures() -> None:
    """Preservation by count and length, suppressed and fabricated shares: one bar per value."""
    figs = dict(re.findall(r'<figure class="chart" id="([^"]+)" data-marks="(\d+)"', _page()))
    assert figs == {
        "fig-preservation-count": "4",
        "fig-preservation-length": "4",
        "fig-suppressed": "2",
        "fig-fabricated": "2",
    }


def test_custodian_report_says_it_is_private_and_links_the_public_one() -> None:
    """The first paragraph warns it is computed from the sensitive data and must not be shared;
    the headline table shows the TVD against the data; the page is deterministic."""
    page = _page()
    text = re.sub(r"<[^>]+>", " ", page)
    assert "PRIVATE: computed from the sensitive data" in text and "Never publish" in text
    assert "href='../../releases/demo/rel-1/report.html'" in page
    assert "<td class='num'>0.05</td><td class='num'>0.2</td>" in page  # length 1 TVD mean, max
    assert _page() == page


def test_custodian_report_holds_the_warnings_budget_and_stage_times() -> None:
    """What the public files leave out is here: the warnings counted from the data, the
    dataset's budget before and after the release, and the time of every stage."""
    budget = BudgetSnapshot(10.0, 1e-4, 7.0, 9e-5, 1.0, 1e-6, 6.0, 8.9e-5, 0.0)
    stages = [{"name": "ingest", "duration_s": 0.2}, {"name": "aggregate-1", "duration_s": 1.5}]
    page = custodian_report_html(
        MANIFEST,
        evaluation_json(EVALUATION),
        "report.html",
        budget=budget,
        stages=stages,
        warnings=['column age (under 1% of rows) holds "0"'],
    ).decode()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert 'column age (under 1% of rows) holds "0"' in text
    assert "Before this release ε = 7 was left" in text and "ε = 6 (δ = 8.9e-05) remains" in text
    figs = dict(re.findall(r'<figure class="chart" id="([^"]+)" data-marks="(\d+)"', page))
    assert figs["fig-budget"] == "3" and figs["fig-timing"] == "2"
    assert "Figure 6. Time per stage" in text  # numbered after the four utility figures
