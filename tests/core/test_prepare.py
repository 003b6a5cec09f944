"""Tests of sds_core.data.preparation: the SDS data-block behaviours (spec §3.3, §6) and bad
input."""

from __future__ import annotations

import csv
import itertools
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sds_core.data.preparation import (
    Binning,
    PrepareParams,
    SubjectValues,
    fingerprint,
    prepare,
    subject_values,
    to_frame,
    to_sorted_rows,
)
from sds_core.data.table import MultiValueColumn, PreparedTable
from sds_core.errors import SdsInputError

MV_BCD = (("B", ";"), ("C", ";"), ("D", "|"))


def load(shared_data: Path, name: str) -> list[list[str]]:
    """Raw rows (row 0 = headers) of an SDS fixture."""
    with open(shared_data / "sds-fixtures" / name, newline="") as fh:
        return [row for row in csv.reader(fh)]


def records(table: PreparedTable) -> list[dict[str, str]]:
    """Non-empty cells of each record as {column: value}."""
    frame = to_frame(table)
    return [{c: v for c, v in row.items() if v != ""} for row in frame.to_dict("records")]


def exact_aggregates(table: PreparedTable, length: int) -> dict[str, int]:
    """Exact SDS counts of all combinations of 1..length attributes, keyed ``A:a;B:b``."""
    texts = table.domain.attribute_texts()
    counts: Counter[str] = Counter()
    for ids in table.attribute_ids():
        attrs = sorted(texts[i] for i in ids)
        for k in range(1, length + 1):
            counts.update(";".join(c) for c in itertools.combinations(attrs, k))
    return dict(counts)


# --- test_data_block.csv: escaping, zeros, selection, record limit ------------------------


def test_data_block_all_columns(shared_data: Path) -> None:
    """Headers/values are escaped, "" and "0" are empty, records keep their order."""
    t = prepare(load(shared_data, "test_data_block.csv"))
    assert t.domain.columns == ("A", "B", "C", "D<semicolon>h", "E<colon>h")
    assert records(t) == [
        {"A": "a1", "C": "c1", "D<semicolon>h": "d1"},
        {"A": "a2", "B": "b2", "D<semicolon>h": "d3<semicolon>D", "E<colon>h": "e2"},
        {"A": "a3<colon>A", "B": "b3"},
        {"D<semicolon>h": "d4"},
    ]
    assert t.domain.labels[0] == ("a1", "a2", "a3<colon>A")
    assert t.multi_value_columns == ()


def test_data_block_selected_columns_sensitive_zeros(shared_data: Path) -> None:
    """Column selection matches raw headers; a sensitive-zero column keeps "0"."""
    params = PrepareParams(use_columns=("A", "b", " D;h "), sensitive_zeros=("B",))
    t = prepare(load(shared_data, "test_data_block.csv"), params)
    assert t.domain.columns == ("A", "B", "D<semicolon>h")
    assert records(t) == [
        {"A": "a1", "B": "0", "D<semicolon>h": "d1"},
        {"A": "a2", "B": "b2", "D<semicolon>h": "d3<semicolon>D"},
        {"A": "a3<colon>A", "B": "b3"},
        {"B": "0", "D<semicolon>h": "d4"},
    ]


def test_data_block_record_limit(shared_data: Path) -> None:
    """record_limit keeps the first L data rows; 0 and None keep all."""
    raw = load(shared_data, "test_data_block.csv")
    params = PrepareParams(use_columns=("A", "B", "D;h"), sensitive_zeros=("B",), record_limit=2)
    assert records(prepare(raw, params)) == [
        {"A": "a1", "B": "0", "D<semicolon>h": "d1"},
        {"A": "a2", "B": "b2", "D<semicolon>h": "d3<semicolon>D"},
    ]
    assert prepare(raw, PrepareParams(record_limit=0)).n_records == 4
    assert prepare(raw, PrepareParams(record_limit=99)).n_records == 4


def test_sorted_rows_of_data_block(shared_data: Path) -> None:
    """to_sorted_rows: header, lexicographic order, then stable by non-empty count desc."""
    t = prepare(load(shared_data, "test_data_block.csv"))
    assert to_sorted_rows(t) == [
        ["A", "B", "C", "D<semicolon>h", "E<colon>h"],
        ["a2", "b2", "", "d3<semicolon>D", "e2"],
        ["a1", "", "c1", "d1", ""],
        ["a3<colon>A", "b3", "", "", ""],
        ["", "", "", "d4", ""],
    ]
    # a non-empty empty_value counts as a value: only the lexicographic order remains
    rows = to_sorted_rows(t, empty_value="~")
    assert [r[0] for r in rows[1:]] == ["a1", "a2", "a3<colon>A", "~"]


# --- test_data_block_multi_value.csv: expansion ------------------------------------------


def test_multi_value_all_columns(shared_data: Path) -> None:
    """Binary columns <col>_<value> sorted in place; "0" parts dropped; quoted value escaped."""
    t = prepare(
        load(shared_data, "test_data_block_multi_value.csv"),
        PrepareParams(multi_value_columns=MV_BCD, allow_empty_columns=True),
    )
    assert t.domain.columns == (
        "RowID",
        "A",
        "B_b1",
        "B_b3",
        "B_b4",
        "C_c1",
        "C_c2",
        "C_c3",
        "F<colon>SenseZeros",
        "G<colon>SenseZeros",
        "D_d1",
        "D_d3",
        "D_d4",
    )
    ones = dict.fromkeys
    assert records(t) == [
        {
            "RowID": "1",
            "A": "a1",
            **ones(["B_b1", "B_b3", "B_b4", "C_c1", "C_c2", "C_c3"], "1"),
            **ones(["D_d1", "D_d3"], "1"),
        },
        {"RowID": "2", "A": "a1", "C_c1": "1", "D_d1": "1", "D_d4": "1"},
        {
            "RowID": "3",
            "A": "a1",
            "B_b1": "1",
            "G<colon>SenseZeros": "Value<semicolon>ToNormalize",
            "D_d1": "1",
        },
    ]
    assert t.multi_value_columns[0] == MultiValueColumn(
        "B", ";", ("B_b1", "B_b3", "B_b4"), ("b1", "b3", "b4")
    )
    assert [m.source for m in t.multi_value_columns] == ["B", "C", "D"]
    assert t.multi_value_columns[2].delimiter == "|"
    with pytest.raises(SdsInputError, match=r"without any non-empty value: \['F<colon>SenseZeros'"):
        prepare(
            load(shared_data, "test_data_block_multi_value.csv"),
            PrepareParams(multi_value_columns=MV_BCD),
        )


def test_multi_value_selected_columns(shared_data: Path) -> None:
    """A declared multi-value column left out by use_columns is simply not there."""
    t = prepare(
        load(shared_data, "test_data_block_multi_value.csv"),
        PrepareParams(use_columns=("A", "C", "D"), multi_value_columns=MV_BCD),
    )
    assert t.domain.columns == ("A", "C_c1", "C_c2", "C_c3", "D_d1", "D_d3", "D_d4")
    assert [sorted(r) for r in records(t)] == [
        ["A", "C_c1", "C_c2", "C_c3", "D_d1", "D_d3"],
        ["A", "C_c1", "D_d1", "D_d4"],
        ["A", "D_d1"],
    ]


def test_multi_value_selected_columns_sensitive_zeros(shared_data: Path) -> None:
    """Sensitive zeros apply to multi-value parts (B_0); names match trimmed, any case."""
    params = PrepareParams(
        use_columns=("A", "B", "  g:senseZeros ", "D"),
        multi_value_columns=(("B", ";"), ("d", "|")),
        sensitive_zeros=("b", "  g:senseZeros "),
    )
    t = prepare(load(shared_data, "test_data_block_multi_value.csv"), params)
    assert t.domain.columns == (
        "A",
        "B_0",
        "B_b1",
        "B_b3",
        "B_b4",
        "G<colon>SenseZeros",
        "D_d1",
        "D_d3",
        "D_d4",
    )
    assert records(t) == [
        {
            "A": "a1",
            "B_b1": "1",
            "B_b3": "1",
            "B_b4": "1",
            "G<colon>SenseZeros": "0",
            "D_d1": "1",
            "D_d3": "1",
        },
        {"A": "a1", "B_0": "1", "G<colon>SenseZeros": "0", "D_d1": "1", "D_d4": "1"},
        {
            "A": "a1",
            "B_0": "1",
            "B_b1": "1",
            "G<colon>SenseZeros": "Value<semicolon>ToNormalize",
            "D_d1": "1",
        },
    ]


# --- multi-value re-join -------------------------------------------------------------------

JOINED = [
    ["1", "a1", "0;b1;b3;b4", "c1;c2;c3", "", "", "d1|d3"],
    ["2", "a1", "b1", "c1", "", "", "d1"],
    ["3", "a1", "b1", "c1", "", "", "d1"],
    ["4", "a1", "b1;b2;b3", "c2", "1", "", "d2"],
    ["5", "a2", "b1", "c2", "", "", "d2"],
    ["6", "a2", "b2;b3", "c1", "", "", "d1|d4"],
    ["7", "a2", "b2", "c2", "1", "", "d2"],
    ["8", "a2", "b2", "c2", "", "", "d3"],
    ["9", "a2", "b2", "c1;c3;c4", "", "", "d2"],
    ["10", "a2", "", "c2", "", "", "d2"],
    ["11", "a3", "b2", "c2", "", "", "d2"],
]


@pytest.mark.parametrize("empty_value", ["", "N/A", "0"])
def test_multi_value_join_with_empty_values(shared_data: Path, empty_value: str) -> None:
    """Re-joined columns match the reference; empty cells take the chosen empty value."""
    params = PrepareParams(
        multi_value_columns=MV_BCD, sensitive_zeros=("B",), allow_empty_columns=True
    )
    t = prepare(load(shared_data, "test_multi_value_column_joiner.csv"), params)
    frame = to_frame(t, empty_value=empty_value, join_multi_value_columns=True)
    assert list(frame.columns) == ["ID", "A", "B", "C", "F", "G", "D"]
    expected = [[v if v != "" else empty_value for v in row] for row in JOINED]
    assert frame.to_numpy().tolist() == expected
    unjoined = to_frame(t, empty_value=empty_value)
    assert unjoined.shape == (11, 17)
    assert unjoined["B_0"].tolist()[:2] == ["1", empty_value]


def test_multi_value_join_round_trip(shared_data: Path) -> None:
    """Preparing the re-joined frame again gives the identical table (fingerprint)."""
    params = PrepareParams(
        multi_value_columns=MV_BCD, sensitive_zeros=("B",), allow_empty_columns=True
    )
    t = prepare(load(shared_data, "test_multi_value_column_joiner.csv"), params)
    again = prepare(to_frame(t, join_multi_value_columns=True), params)
    assert again.domain == t.domain
    assert np.array_equal(again.codes, t.codes)
    assert fingerprint(again) == fingerprint(t)
    rows = to_sorted_rows(t, join_multi_value_columns=True)
    assert rows[0] == ["ID", "A", "B", "C", "F", "G", "D"]
    assert sorted(rows[1:]) == sorted(JOINED)


# --- subject-id joining ----------------------------------------------------------------------

JOINED_BY_ID = [
    ["1", "a1", "b1;b3;b4", "c1;c2;c3", "", "", "d1|d3"],
    ["2", "a1", "b1;b2;b3", "c2", "1", "", "d2"],
    ["3", "a2", "b1", "c2", "", "", "d2"],
    ["4", "a2", "b2;b3", "c1", "1", "", "d1|d4"],
    ["5", "a2", "b2", "c2", "", "", "d3"],
    ["6", "a2", "b2", "c1;c3;c4", "", "", "d2"],
    ["7", "a2", "", "c2", "", "", "d2"],
    ["8", "a3", "b2", "c2", "", "", "d2"],
    ["9", "a1;a2;b2", "b1;b2", "c2", "", "1", "d1|d10|d3|d7"],
]


def test_subject_id_join_valid(shared_data: Path) -> None:
    """Rows of one subject merge into one record, sorted by id; multi-value takes the union."""
    params = PrepareParams(
        subject_id="ID",
        multi_value_columns=(("A", ";"), *MV_BCD),
        allow_empty_columns=True,
    )
    t = prepare(load(shared_data, "test_duplicated_id_valid.csv"), params)
    assert t.n_records == 9
    frame = to_frame(t, join_multi_value_columns=True)
    assert list(frame.columns) == ["ID", "A", "B", "C", "F", "G", "D"]
    assert frame.to_numpy().tolist() == JOINED_BY_ID


def test_subject_id_missing_id(shared_data: Path) -> None:
    """Any empty subject id is an error with the reference's message."""
    with pytest.raises(SdsInputError, match=r"^records with missing/empty Subject ID"):
        prepare(
            load(shared_data, "test_duplicated_id_missing_id.csv"),
            PrepareParams(subject_id="ID", multi_value_columns=MV_BCD),
        )


def test_subject_id_conflicting_single_values(shared_data: Path) -> None:
    """Different values of one subject in single-value columns list those columns."""
    msg = (
        "^records with duplicated IDs, please set the following columns as multi value if you "
        "want to join records with duplicated IDs: A, B, C, D"
    )
    with pytest.raises(SdsInputError, match=msg):
        prepare(load(shared_data, "test_duplicated_id_valid.csv"), PrepareParams(subject_id="id"))


def test_subject_id_trimmed_lowercased_and_excludable() -> None:
    """Ids match trimmed and case-insensitively; excluded from use_columns it is no attribute."""
    raw = [["ID", "A", "B"], [" X1", "a1", ""], ["x1 ", "", "b1"], ["y", "a2", "b2"]]
    raw.append(["Y", "a2", "0"])
    t = prepare(raw, PrepareParams(subject_id="id", use_columns=("A", "B")))
    assert t.domain.columns == ("A", "B")
    assert records(t) == [{"A": "a1", "B": "b1"}, {"A": "a2", "B": "b2"}]
    # kept as an attribute, the raw id texts "X1"/"x1" conflict, as in the reference
    with pytest.raises(SdsInputError, match="join records with duplicated IDs: ID"):
        prepare(raw, PrepareParams(subject_id="id"))


def test_subject_id_sorted_as_strings_after_record_limit() -> None:
    """Subjects come out in plain string order of their ids; the limit applies before joining."""
    raw = [["id", "v"], ["10", "a"], ["2", "b"], ["10", "a"], ["1", "c"], ["3", "d"]]
    t = prepare(raw, PrepareParams(subject_id="id", record_limit=4))
    assert to_frame(t)["id"].tolist() == ["1", "10", "2"]


# --- typed inputs, equivalence, determinism ----------------------------------------------------


def test_dataframe_arrow_raw_rows_agree() -> None:
    """prepare(DataFrame) == prepare(Arrow table) == prepare(raw rows) on typed cells."""
    frame = pd.DataFrame(
        {
            "puma": [60100.0, 61403.0, np.nan, 60100.0],
            "age": [58, 20, 0, 31],
            "income": [1800.5, 0.0, 12.25, None],
            "cat": ["less 10k", None, " x;y ", "0"],
            "flag": [True, False, True, True],
        }
    )
    raw = [
        ["puma", "age", "income", "cat", "flag"],
        ["60100", "58", "1800.5", "less 10k", "True"],
        ["61403", "20", "0", "", "False"],
        ["", "0", "12.25", " x;y ", "True"],
        ["60100", "31", "", "0", "True"],
    ]
    params = PrepareParams(sensitive_zeros=("age",))
    a = prepare(frame, params)
    b = prepare(pa.Table.from_pandas(frame, preserve_index=False), params)
    c = prepare(raw, params)
    assert fingerprint(a) == fingerprint(b) == fingerprint(c)
    assert a.domain.labels[0] == ("60100", "61403")  # no ".0"
    assert a.domain.labels[1] == ("0", "20", "31", "58")  # sensitive zero kept
    assert a.domain.labels[2] == ("12.25", "1800.5")  # 0.0 -> "0" -> empty
    assert a.domain.labels[3] == ("less 10k", "x<semicolon>y")


def test_encoding_is_deterministic_and_sorted() -> None:
    """Same input -> identical codes/domain; labels sorted by plain str order, codes 0..k-1."""
    raw = [["H", "h2"], ["b", "10"], ["B", "9"], ["a", ""], ["b", "10"]]
    t1, t2 = prepare(raw), prepare([list(r) for r in raw])
    assert fingerprint(t1) == fingerprint(t2)
    assert t1.domain.labels == (("B", "a", "b"), ("10", "9"))
    assert t1.codes.dtype == np.int32
    assert t1.codes.tolist() == [[2, 0], [0, 1], [1, -1], [2, 0]]
    shuffled = prepare([raw[0], *reversed(raw[1:])])
    assert shuffled.domain == t1.domain
    assert shuffled.codes.tolist() == t1.codes.tolist()[::-1]
    assert fingerprint(shuffled) != fingerprint(t1)


def test_to_frame_unescape_and_empty_value(shared_data: Path) -> None:
    """to_frame decodes with escaped names by default; unescape restores ';' and ':'."""
    t = prepare(load(shared_data, "test_data_block.csv"))
    plain = to_frame(t, empty_value="-")
    assert list(plain.columns) == ["A", "B", "C", "D<semicolon>h", "E<colon>h"]
    assert plain.iloc[3].tolist() == ["-", "-", "-", "d4", "-"]
    raw = to_frame(t, unescape=True)
    assert list(raw.columns) == ["A", "B", "C", "D;h", "E:h"]
    assert raw["D;h"].tolist() == ["d1", "d3;D", "", "d4"]
    assert raw["A"].tolist()[2] == "a3:A"


def test_binning_inside_prepare() -> None:
    """Binned columns get declared labels; "0" stays empty unless declared a sensitive zero."""
    frame = pd.DataFrame({"age": [5, 17, 18, 64, 0, 130], "inc": [0.0, 2.5, 9.9, 10.0, 25.0, 7.5]})
    params = PrepareParams(
        binning=(Binning("AGE", edges=(0, 18, 65, 120)), Binning("inc", width=10.0))
    )
    t = prepare(frame, params)
    f = to_frame(t)
    assert f["age"].tolist() == ["0-18", "0-18", "18-65", "18-65", "", ">120"]
    assert f["inc"].tolist() == ["", "0-10", "0-10", "10-20", "20-30", "0-10"]
    t2 = prepare(frame, PrepareParams(binning=params.binning, sensitive_zeros=("age", "inc")))
    assert to_frame(t2)["age"].tolist()[4] == "0-18"
    assert to_frame(t2)["inc"].tolist()[0] == "0-10"


def test_binning_non_numeric_cell_names_column_and_row() -> None:
    """A non-numeric cell in a binned column raises naming the column and the data row."""
    raw = [["x", "y"], ["1", "a"], ["2", "b"], ["oops", "c"], ["nan", "d"]]
    with pytest.raises(SdsInputError, match=r"binning of column 'x': data row 2 \(0-based"):
        prepare(raw, PrepareParams(binning=(Binning("x", width=1),)))


# --- bad input -----------------------------------------------------------------------------------

RAW = [["A", "B"], ["a1", "b1"], ["a2", ""]]


@pytest.mark.parametrize(
    ("data", "params", "match"),
    [
        (pd.DataFrame({"A": []}), PrepareParams(), "no rows"),
        ([["A", "B"]], PrepareParams(), "no rows"),
        ([], PrepareParams(), "row 0 must hold the headers"),
        (pd.DataFrame(index=range(3)), PrepareParams(), "no columns"),
        ([[]], PrepareParams(), "no columns"),
        ("A,B\n1,2", PrepareParams(), "must be a pandas DataFrame"),
        ([["A", " A"], ["1", "2"]], PrepareParams(), r"duplicate column names.*\['A'\]"),
        ([["A", "B"], ["1", "2"], ["3"]], PrepareParams(), "raw data row 2 has 1 cells"),
        (RAW, PrepareParams(use_columns=("A", "Z")), r"use_columns: unknown .*'Z'.*\['A', 'B'\]"),
        (RAW, PrepareParams(sensitive_zeros=("Q",)), "sensitive_zeros: unknown column 'Q'"),
        (RAW, PrepareParams(multi_value_columns=(("Q", ";"),)), "multi_value_columns: unknown"),
        (RAW, PrepareParams(binning=(Binning("Q", width=1),)), "binning: unknown column 'Q'"),
        (RAW, PrepareParams(subject_id="Q"), "subject_id: unknown column 'Q'"),
        ([["A", "B"], ["a", ""], ["b", "0"]], PrepareParams(), r"without any .*value: \['B'\]"),
        ([["A", "B"], ["a", ""]], PrepareParams(use_columns=("B",)), "allow_empty_columns=True"),
        (
            [["B", "B_x"], ["x", "1"]],
            PrepareParams(multi_value_columns={"B": ";"}),
            r"already exist: \['B_x'\]",
        ),
    ],
)
def test_bad_input_raises(data: object, params: PrepareParams, match: str) -> None:
    """Every kind of bad input raises SdsInputError naming the problem."""
    with pytest.raises(SdsInputError, match=match):
        prepare(data, params)  # type: ignore[arg-type]


def test_allow_empty_columns() -> None:
    """With allow_empty_columns an empty column has no labels; an empty multi-value one vanishes."""
    raw = [["A", "B", "M"], ["a", "", "0"], ["b", "0", ""]]
    t = prepare(raw, PrepareParams(multi_value_columns={"M": ";"}, allow_empty_columns=True))
    assert t.domain.columns == ("A", "B")
    assert t.domain.cardinalities == (2, 0)
    assert t.codes[:, 1].tolist() == [-1, -1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"record_limit": -1}, "record_limit must be None or an integer >= 0"),
        ({"record_limit": 1.5}, "record_limit"),
        ({"use_columns": "A"}, "use_columns must be a sequence of column names"),
        ({"use_columns": ("A", " a")}, "use_columns names a column twice"),
        ({"sensitive_zeros": (1,)}, "sensitive_zeros must be a sequence"),
        ({"multi_value_columns": (("A", ""),)}, "non-empty delimiter"),
        ({"multi_value_columns": (("A", ";"), ("a", "|"))}, "multi_value_columns names a column"),
        ({"binning": ("A",)}, "binning must hold Binning objects"),
        (
            {"binning": (Binning("A", width=1),), "multi_value_columns": {"a": ";"}},
            "both binned and multi-value",
        ),
        ({"subject_id": "  "}, "subject_id must be a non-empty column name"),
    ],
)
def test_params_validation(kwargs: dict[str, object], match: str) -> None:
    """PrepareParams rejects bad values naming the parameter and the rule."""
    with pytest.raises(SdsInputError, match=match):
        PrepareParams(**kwargs)  # type: ignore[arg-type]


def test_params_accept_lists_and_dicts() -> None:
    """Lists and a {column: delimiter} dict are stored as (hashable) tuples."""
    p = PrepareParams(use_columns=["A"], multi_value_columns={"B": ";"}, binning=[])  # type: ignore[arg-type]
    assert p.use_columns == ("A",)
    assert p.multi_value_columns == (("B", ";"),)
    assert hash(p) == hash(PrepareParams(use_columns=("A",), multi_value_columns=(("B", ";"),)))


# --- against the reference (pac-synth) -----------------------------------------------------------

CASES = [
    ("test_block.csv", {}, {}),
    ("test_data_block.csv", {}, {}),
    ("test_data_block.csv", {"use_columns": ["A", "B", "D;h"], "sensitive_zeros": ["B"]}, {}),
    ("test_data_block.csv", {"record_limit": 2}, {}),
    ("test_data_block_multi_value.csv", {"multi_value_columns": dict(MV_BCD)}, {}),
    (
        "test_data_block_multi_value.csv",
        {
            "use_columns": ["A", "B", "  g:senseZeros ", "D"],
            "multi_value_columns": {"B": ";", "d": "|"},
            "sensitive_zeros": ["b", "  g:senseZeros "],
        },
        {},
    ),
    ("test_multi_value_column_joiner.csv", {"multi_value_columns": dict(MV_BCD)}, {}),
    (
        "test_duplicated_id_valid.csv",
        {"multi_value_columns": {"A": ";", **dict(MV_BCD)}},
        {"subject_id": "ID"},
    ),
    ("test_noise_aggregator.csv", {}, {}),
]


@pytest.mark.pacsynth
@pytest.mark.parametrize(("name", "kwargs", "extra"), CASES)
def test_aggregates_match_pacsynth(
    shared_data: Path, name: str, kwargs: dict[str, object], extra: dict[str, str]
) -> None:
    """Our encoded records give exactly pac-synth's exact aggregates (R=3) on the fixtures."""
    pacsynth = pytest.importorskip("pacsynth")
    raw = load(shared_data, name)
    reference = pacsynth.Dataset(raw, **extra, **kwargs).get_aggregates(3, ";")
    mvc = kwargs.get("multi_value_columns", {})
    params = PrepareParams(
        use_columns=tuple(kwargs.get("use_columns", ())),  # type: ignore[arg-type]
        sensitive_zeros=tuple(kwargs.get("sensitive_zeros", ())),  # type: ignore[arg-type]
        multi_value_columns=tuple(mvc.items()),  # type: ignore[union-attr]
        record_limit=kwargs.get("record_limit"),  # type: ignore[arg-type]
        subject_id=extra.get("subject_id"),
        allow_empty_columns=True,
    )
    assert exact_aggregates(prepare(raw, params), 3) == reference


@pytest.mark.pacsynth
@pytest.mark.shared
def test_pums_aggregates_match_pacsynth(shared_data: Path) -> None:
    """On the first 2,000 PUMS rows (read as text) the length-1..2 aggregates equal pac-synth's."""
    pacsynth = pytest.importorskip("pacsynth")
    frame = pd.read_csv(shared_data / "pums" / "PUMS_ca_10k.csv", dtype=str, keep_default_na=False)
    frame = frame.iloc[:2000]
    raw = [list(frame.columns), *frame.to_numpy().tolist()]
    reference = pacsynth.Dataset(raw).get_aggregates(2, ";")
    assert exact_aggregates(prepare(frame), 2) == reference
    assert exact_aggregates(prepare(pa.Table.from_pandas(frame)), 2) == reference


# --- properties on random small tables ---------------------------------------------------------

CELLS = st.sampled_from(["", "0", " a ", "a", "A", "b;c", "x:y", "a|b", "0|a", " |b", "c | 0"])
HEADERS = ["ID", "P", "q;r", "S:t"]


@st.composite
def random_tables(draw: st.DrawFn) -> tuple[list[list[str]], dict[str, object]]:
    """A raw table over HEADERS and pac-synth-style keyword arguments for it."""
    n = draw(st.integers(1, 8))
    ids = st.sampled_from(["1", "2", " 1", "X", "x"])
    rows = [[draw(ids), *(draw(CELLS) for _ in HEADERS[1:])] for _ in range(n)]
    kwargs: dict[str, object] = {}
    multi = draw(st.lists(st.sampled_from(HEADERS[1:]), unique=True))
    if multi:
        kwargs["multi_value_columns"] = dict.fromkeys(multi, "|")
    zeros = draw(st.lists(st.sampled_from(HEADERS), unique=True))
    if zeros:
        kwargs["sensitive_zeros"] = zeros
    if draw(st.booleans()):
        kwargs["use_columns"] = draw(st.lists(st.sampled_from(HEADERS), min_size=1, unique=True))
    if draw(st.booleans()):
        kwargs["subject_id"] = "id"
    if draw(st.booleans()):
        kwargs["record_limit"] = draw(st.integers(0, 8))
    return [HEADERS, *rows], kwargs


def params_of(kwargs: dict[str, object]) -> PrepareParams:
    """PrepareParams equal to pac-synth Dataset keyword arguments."""
    return PrepareParams(
        use_columns=tuple(kwargs.get("use_columns", ())),  # type: ignore[arg-type]
        sensitive_zeros=tuple(kwargs.get("sensitive_zeros", ())),  # type: ignore[arg-type]
        multi_value_columns=tuple(kwargs.get("multi_value_columns", {}).items()),  # type: ignore[attr-defined]
        subject_id=kwargs.get("subject_id"),  # type: ignore[arg-type]
        record_limit=kwargs.get("record_limit"),  # type: ignore[arg-type]
        allow_empty_columns=True,
    )


@settings(max_examples=150, deadline=None)
@given(random_tables())
def test_random_tables_round_trip(case: tuple[list[list[str]], dict[str, object]]) -> None:
    """Re-preparing the decoded (re-joined) table gives the same table, for any parameters."""
    raw, kwargs = case
    params = params_of(kwargs)
    try:
        t = prepare(raw, params)
    except SdsInputError as e:
        assert "duplicated IDs" in str(e)
        return
    if t.domain.n_columns == 0:  # every column was an all-empty multi-value column
        return
    frame = to_frame(t, join_multi_value_columns=True)
    decoded = PrepareParams(
        sensitive_zeros=tuple(frame.columns),  # a "0" that survived preparation is a value
        multi_value_columns=tuple((m.source, m.delimiter) for m in t.multi_value_columns),
        allow_empty_columns=True,
    )
    again = prepare(frame, decoded)
    assert again.domain == t.domain
    assert np.array_equal(again.codes, t.codes)


@pytest.mark.pacsynth
@settings(max_examples=150, deadline=None)
@given(random_tables())
def test_random_tables_match_pacsynth(case: tuple[list[list[str]], dict[str, object]]) -> None:
    """On random tables we fail exactly when pac-synth fails, else give its exact aggregates."""
    pacsynth = pytest.importorskip("pacsynth")
    raw, kwargs = case
    try:
        reference = pacsynth.Dataset(raw, **kwargs).get_aggregates(2, ";")
    except OSError as e:
        with pytest.raises(SdsInputError, match=re.escape(str(e))):
            prepare(raw, params_of(kwargs))
        return
    assert exact_aggregates(prepare(raw, params_of(kwargs)), 2) == reference


def test_to_arrow_matches_to_frame() -> None:
    """The Arrow output holds the same strings and column names as the DataFrame output."""
    import pyarrow as pa

    from sds_core.data.decoding import to_arrow

    frame = pd.DataFrame({"A": ["1", "2", "", "3"], "B": ["x;y", "y", "", "x"]})
    t = prepare(frame, PrepareParams(multi_value_columns=(("B", ";"),)))
    for join in (False, True):
        arrow = to_arrow(t, empty_value="-", join_multi_value_columns=join)
        df = to_frame(t, empty_value="-", join_multi_value_columns=join)
        assert arrow.column_names == list(df.columns)
        assert all(pa.types.is_large_string(f.type) for f in arrow.schema)
        assert [arrow.column(i).to_pylist() for i in range(arrow.num_columns)] == [
            df[c].tolist() for c in df.columns
        ]
    assert to_arrow(t, join_multi_value_columns=True).column("B").to_pylist() == [
        "x;y",
        "y",
        "",
        "x",
    ]


def test_aggregate_table_refuses_a_column_named_like_its_own() -> None:
    """A column named ``count`` would overwrite the table's count column: refused, named."""
    from sds_core.marginals.exact_counts import exact_aggregates as aggregates

    t = prepare(pd.DataFrame({"a": ["1", "2", "1"], "count": ["x", "y", "x"]}), PrepareParams())
    with pytest.raises(SdsInputError, match=r"\['count'\]"):
        aggregates(t, 2).to_arrow()
    ok = prepare(pd.DataFrame({"a": ["1", "2", "1"], "n": ["x", "y", "x"]}), PrepareParams())
    assert aggregates(ok, 2).to_arrow().column_names[:4] == [
        "length", "combination", "count", "a"
    ]  # fmt: skip


JOIN_ROWS = [
    ["id", "A", "B", "age"],
    ["x", "a1", "b1", "30"],
    [" X", "a1", "0", "30"],  # the same subject; "0" is empty, so B agrees
    ["y", "a1", "b1", "20"],
    ["y", "a2", "", "61"],  # y disagrees on A and (before binning) on age
    ["z", "a3", "b2", ""],
]


def test_subject_values_finds_what_the_join_refuses() -> None:
    """subject_values' conflicts are the columns prepare's join refuses; empty cells and
    non-sensitive "0" cells are no value, so they never conflict."""
    params = PrepareParams(subject_id="id", use_columns=("A", "B", "age"))
    with pytest.raises(SdsInputError, match="duplicated IDs: A, age "):
        prepare(JOIN_ROWS, params)
    found = subject_values(JOIN_ROWS, params)
    assert found.subjects == ("x", "y", "z") and found.columns == ("A", "B", "age")
    assert found.conflicts() == ["A", "age"]
    agreeing = [r for r in JOIN_ROWS if r[0] != "y"]
    assert subject_values(agreeing, params).conflicts() == []
    prepare(agreeing, params)  # the join accepts what subject_values accepts


def test_subject_values_compare_unbinned_text_before_the_bins() -> None:
    """A column compared before its bins exist conflicts on two numbers of one bin (20 and 29),
    which the binned join accepts; ``columns`` restricts the comparison."""
    rows = [["id", "A", "age"], ["x", "a", "20"], ["x", "a", "29"]]
    unbinned = PrepareParams(subject_id="id", use_columns=("A", "age"))
    bins = (Binning("age", edges=(0.0, 30.0, 60.0)),)
    prepare(rows, PrepareParams(subject_id="id", use_columns=("A", "age"), binning=bins))
    assert subject_values(rows, unbinned).conflicts() == ["age"]
    assert subject_values(rows, unbinned, ["A"]).conflicts() == []


def test_subject_values_of_parts_merge_to_the_whole() -> None:
    """Cut into parts anywhere (a subject's rows in two parts), the merged values are the whole
    table's: the conflict of subject y is found across parts."""
    params = PrepareParams(subject_id="id", use_columns=("A", "B", "age"))
    whole = subject_values(JOIN_ROWS, params)
    for cut in range(2, len(JOIN_ROWS)):
        parts = [JOIN_ROWS[:cut], [JOIN_ROWS[0], *JOIN_ROWS[cut:]]]
        merged = SubjectValues.merge([subject_values(p, params) for p in parts])
        assert merged.subjects == whole.subjects and merged.conflicts() == whole.conflicts()
        assert np.array_equal(merged.low, whole.low) and np.array_equal(merged.high, whole.high)
