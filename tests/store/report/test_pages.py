"""report.html and explorer.html built from hand-made inputs (no browser, no Prefect server)."""

from __future__ import annotations

import base64
import gzip
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.dp.intervals import Z_95
from sds_core.evaluation.agreement import agreement, agreement_summary
from sds_core.marginals.aggregates import AggregateSet
from sds_release.store.report.explorer import explorer_html
from sds_release.store.report.inputs import ReportInputs, count_sd, sd_by_len
from sds_release.store.report.page import report_html, unpublished_columns
from sds_release.store.workspace.encoding import HALF_WIDTH_COLUMN, aggregates_parquet
from tests.helpers import run_cli

DOMAIN = Domain(("A", "B", "C"), (("a1", "a</script><b>x"), ("b1", "b2"), ("c1", "hidden-value")))
DP = {
    "A:a1": 60,
    "A:a</script><b>x": 40,
    "B:b1": 50,
    "B:b2": 50,
    "C:c1": 90,
    "A:a1;B:b1": 40,
    "A:a</script><b>x;B:b2": 30,
    "A:a1;C:c1": 60,
    "B:b1;C:c1": 50,
}
RECORDS = np.array(
    [[0, 0, 0]] * 30 + [[0, 1, 0]] * 25 + [[1, 1, 0]] * 30 + [[1, 0, -1]] * 12, dtype=np.int32
)
NOISE = {
    "record_count": {"mechanism": "discrete-laplace", "scale": 50.0},
    "by_length": [
        {
            "length": 1,
            "mechanism": "discrete-gaussian",
            "sigma": 4.0,
            "allowed_sensitivity": 1,
            "threshold": 21.5,
        },
        {
            "length": 2,
            "mechanism": "discrete-gaussian",
            "sigma": 3.0,
            "allowed_sensitivity": 4,
            "threshold": None,
        },
    ],
    "how_to_read": "read me",
}


def make_inputs(noise: dict | None = NOISE) -> ReportInputs:
    """Report inputs of a hand-made release (R = 2) with noise and its agreement."""
    dp = AggregateSet.from_text_dict(DOMAIN, DP, 2, protected_number_of_records=103, is_dp=True)
    manifest = {
        "release_id": "rel-1",
        "dataset": "demo",
        "created_at": "2026-11-23T00:00:00.000+00:00",
        "parameters": {"epsilon": 1.0, "reporting_length": 2, "synthesizer": "aggregate-seeded"},
        "privacy": {
            "epsilon": 1.0,
            "delta": 1e-6,
            "stages": [
                {"stage": "count", "mechanism": "discrete-laplace", "epsilon": 0.1, "delta": 0.0},
                {"stage": "aggregate-1", "mechanism": "zcdp", "epsilon": 0.4, "delta": 5e-7},
                {"stage": "aggregate-2", "mechanism": "zcdp", "epsilon": 0.5, "delta": 5e-7},
            ],
            **({"noise": noise} if noise is not None else {}),
        },
        "input": {"rows": 103},
        "stages": [{"name": "count"}, {"name": "plan", "duration_s": 0.2}],
        "artifacts": {"aggregates.parquet": "ab" * 32},
    }
    compared = agreement(dp, PreparedTable(DOMAIN, RECORDS))
    evaluation = agreement_summary(compared, sd_by_len(manifest))
    return ReportInputs(manifest, evaluation, compared, len(RECORDS))


def figures(page: str) -> dict[str, int]:
    """figure id -> data-marks of a report."""
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r'<figure class="chart" id="([^"]+)" data-marks="(\d+)"', page)
    }


def decode(page: str) -> tuple[dict, bytes]:
    """The explorer's metadata and its decompressed binary block."""
    meta = json.loads(re.search(r"id='meta'>(.*?)</script>", page, re.S).group(1))
    blob = re.search(r"id='data'>(.*?)</script>", page, re.S).group(1)
    return meta, gzip.decompress(base64.b64decode(blob))


def test_report_has_every_chart_with_marks() -> None:
    """Spend, noise, one 1-way chart per column, heatmap, agreement: and no figure of the
    evaluation against the sensitive data, the budget or the stage times (the custodian's)."""
    figs = figures(report_html(make_inputs()).decode())
    assert figs == {
        "fig-spend": 3,
        "fig-noise": 3,  # two noise bars, one threshold (length 2 has none)
        "fig-oneway-0": 4,
        "fig-oneway-1": 4,
        "fig-oneway-2": 2,  # only c1 is published
        "fig-pair-tvd": 6,
        "fig-error-length": 4,  # mean error and noise sd, two lengths
        "fig-within-noise": 2,
        "fig-tvd-length": 2,
    }


def test_report_summary_states_guarantee_and_count() -> None:
    """The summary names ε, δ and the DP record count with its noise; nothing of the dataset's
    budget before or after the release (which other releases spent) and no stage time."""
    text = re.sub(r"<[^>]+>", "", report_html(make_inputs()).decode())
    assert "(ε = 1)" in text and "δ = 1e-06" in text
    assert "Before this release" not in text and "remains" not in text
    assert "How long it took" not in text and "seconds" not in text
    assert "Protected record count: 103" in text and "±150" in text
    assert "Figure 1 is computed from: manifest.json privacy.stages" in text


def test_pages_are_self_contained_and_escape_labels() -> None:
    """No external reference, a CSP that forbids loading anything, labels escaped everywhere."""
    inputs = make_inputs()
    for page in (report_html(inputs).decode(), explorer_html(inputs).decode()):
        assert "default-src 'none'" in page
        assert not re.search(r"""(src|href)=['"](?!#|explorer\.html|report\.html)""", page)
        assert set(re.findall(r"https?://[^\s\"'<]+", page)) <= {"http://www.w3.org/2000/svg"}
        assert page.count("</script>") == page.count("<script")  # no label closes a script
        assert "a</script><b>x" not in page


@pytest.mark.parametrize("synthetic_holds_one", [False, True])
def test_unpublished_columns_note_names_only_wholly_unreported_columns(
    synthetic_holds_one: bool,
) -> None:
    """A column none of whose values has a DP count and no synthetic record holds: one note
    (its name escaped), no 1-way chart; a column with any published or synthetic value: none."""
    assert unpublished_columns(make_inputs()) == ""  # every column of the hand-made release
    domain = Domain((*DOMAIN.columns, "D<i>"), (*DOMAIN.labels, ("d1", "d2")))
    records = np.column_stack([RECORDS, np.full(len(RECORDS), -1, dtype=np.int32)])
    if synthetic_holds_one:
        records[0, 3] = 1
    dp = AggregateSet.from_text_dict(domain, DP, 2, protected_number_of_records=103, is_dp=True)
    base = make_inputs()
    inputs = ReportInputs(
        base.manifest, base.evaluation, agreement(dp, PreparedTable(domain, records)),
        len(records),
    )  # fmt: skip
    note = unpublished_columns(inputs)
    page = report_html(inputs).decode()
    if synthetic_holds_one:
        assert note == "" and "fig-oneway-3" in figures(page)
    else:
        assert note.count("<p class='note'") == 1 and "id='oneway-none-3'" in note
        assert "<b>D&lt;i&gt;</b>: no value of this column is reported" in note
        assert note in page and "fig-oneway-3" not in figures(page)
    assert "oneway-none-0" not in page and "oneway-none-2" not in page


def test_unpublished_value_is_never_written() -> None:
    """A domain value with no published count (C:hidden-value) appears in neither page."""
    inputs = make_inputs()
    for page in (report_html(inputs), explorer_html(inputs)):
        assert b"hidden-value" not in page
    meta, data = decode(explorer_html(inputs).decode())
    assert b"hidden-value" not in data
    assert meta["attr_label"] == ["a1", "a</script><b>x", "b1", "b2", "c1"]


def test_explorer_payload_round_trips() -> None:
    """Decoding the embedded arrays gives back every combination with its two counts; each
    length's error bar is the half-width aggregates.parquet publishes for it."""
    inputs = make_inputs()
    meta, data = decode(explorer_html(inputs).decode())
    assert meta["record_count"] == 103 and meta["synthetic_records"] == len(RECORDS)
    dp = AggregateSet.from_text_dict(DOMAIN, DP, 2, protected_number_of_records=103, is_dp=True)
    published = pd.read_parquet(io.BytesIO(aggregates_parquet(dp.to_arrow(), {1: 4.0, 2: 6.0})))
    half = published.groupby("length")[HALF_WIDTH_COLUMN].unique()
    assert [e["hw"] for e in meta["lengths"]] == [half[1].item(), half[2].item()]
    assert [e["hw"] for e in meta["lengths"]] == [round(Z_95 * 4, 6), round(Z_95 * 6, 6)]
    for e in meta["lengths"]:
        la = inputs.agreement.by_len[e["k"]]
        dp = np.frombuffer(data, "<i4", e["n"], e["dp_offset"])
        syn = np.frombuffer(data, "<i4", e["n"], e["syn_offset"])
        ids = np.stack([np.frombuffer(data, "<u2", e["n"], o) for o in e["attr_offsets"]], 1)
        labels = [
            f"{meta['columns'][meta['attr_column'][i]]}:{meta['attr_label'][i]}"
            for i in range(len(meta["attr_label"]))
        ]
        texts = DOMAIN.attribute_texts()
        assert [[labels[i] for i in row] for row in ids.tolist()] == [
            [texts[a] for a in row] for row in la.attrs.tolist()
        ]
        assert dp.tolist() == la.dp.tolist() and syn.tolist() == la.synthetic.tolist()


def test_pages_are_deterministic() -> None:
    """The same inputs give byte-identical pages (no clock, no randomness, gzip without mtime)."""
    assert report_html(make_inputs()) == report_html(make_inputs())
    assert explorer_html(make_inputs()) == explorer_html(make_inputs())


def test_registry_synthesizer_without_noise() -> None:
    """No per-length noise (a registry synthesizer): no noise chart, the explorer says why."""
    inputs = make_inputs(noise={"record_count": None, "by_length": [], "how_to_read": ""})
    assert "fig-noise" not in figures(report_html(inputs).decode())
    page = explorer_html(inputs).decode()
    assert "carry no separate noise" in page
    assert inputs.sd_by_len() == {} and count_sd(NOISE["by_length"][1]) == 6.0


def _fake_release(home: Path, status: str, with_report: bool = True) -> Path:
    d = home / "releases" / "demo" / "rel-1"
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(
        json.dumps({"release_id": "rel-1", "dataset": "demo", "status": status})
    )
    if with_report:
        (d / "report.html").write_text("<html></html>")
    return d


def test_sds_report_prints_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sds report ID` prints report.html's path; --open hands its file URI to a browser."""
    d = _fake_release(tmp_path, "complete")
    code, out, _ = run_cli("report", "rel-1", "--home", str(tmp_path))
    assert code == 0 and out.strip() == str(d / "report.html")
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda uri: opened.append(uri) or True)
    code, out, _ = run_cli("report", "rel-1", "--open", "--home", str(tmp_path))
    assert code == 0 and opened == [(d / "report.html").as_uri()]


@pytest.mark.parametrize(
    ("status", "with_report", "release_id", "match"),
    [
        ("complete", True, "other", "no release 'other' under"),
        ("running", True, "rel-1", "is running, not complete"),
        ("complete", False, "rel-1", "has no report.html"),
        ("complete", True, "../x", "not valid"),
    ],
)
def test_sds_report_errors(
    tmp_path: Path, status: str, with_report: bool, release_id: str, match: str
) -> None:
    """Unknown, unfinished or report-less releases are refused with a one-paragraph reason."""
    _fake_release(tmp_path, status, with_report)
    code, _, err = run_cli("report", release_id, "--home", str(tmp_path))
    assert code == 2 and re.search(match, " ".join(err.split()))


def test_audit_links_complete_reports(tmp_path: Path) -> None:
    """`sds audit` prints the report of every complete release; --json has its path."""
    d = _fake_release(tmp_path, "complete")
    code, out, _ = run_cli("audit", "--home", str(tmp_path))
    assert code == 0 and f"report of rel-1: {(d / 'report.html').as_uri()}" in out
    code, out, _ = run_cli("audit", "--json", "--home", str(tmp_path))
    assert json.loads(out)["releases"][0]["report"] == str(d / "report.html")
