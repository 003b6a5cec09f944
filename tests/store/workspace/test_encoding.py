"""Publishing a large raw domain: the Arrow writers give the bytes the per-row writers gave."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from sds_core.data.domain import Domain
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_release.store.workspace.encoding import (
    aggregates_parquet,
    aggregates_tsv,
    arrow_csv_bytes,
    csv_bytes,
    parquet_bytes,
)

# sha256 of aggregates.tsv of large_case(), written by the per-row writer of commit 5e0b9d1
# (AggregateSet.to_frame + pandas sort_values) before the Arrow writers replaced it
TSV_SHA256_BEFORE = "157e477d234501edf4dd0edfe96b30e550235a4fcf04a650c8612fb61f6c9ef9"


def large_case(
    seed: int = 11,
    cards: tuple[int, ...] = (400, 150, 60, 12, 3, 2),
    per_len: tuple[int, ...] = (0, 4000, 6000),
) -> AggregateSet:
    """627 attributes with awkward labels (unicode, digits, spaces); every 1-tuple, 10k more."""
    rng = np.random.default_rng(seed)
    pool = ["é", "Z", "a b", "ß", "0", "10", "9", "x<colon>y", "日本", "-1", "A", "z"]
    names = ["income", "Puma", "age", "état", "sex", "b"]
    labels = [tuple(sorted({f"{rng.choice(pool)}{i}" for i in range(card)})) for card in cards]
    domain = Domain(tuple(names[: len(cards)]), tuple(labels))
    offsets = np.asarray(domain.offsets)
    by_len = {}
    for k in (1, 2, 3):
        if k == 1:
            attrs = np.arange(domain.n_attributes, dtype=np.int32).reshape(-1, 1)
        else:
            rows: set[tuple[int, ...]] = set()
            while len(rows) < per_len[k - 1]:
                chosen = sorted(rng.choice(len(cards), size=k, replace=False))
                rows.add(tuple(int(offsets[c] + rng.integers(len(labels[c]))) for c in chosen))
            attrs = np.asarray(sorted(rows), dtype=np.int32)
        counts = rng.integers(1, 5000, size=attrs.shape[0])
        by_len[k] = CombinationCounts.from_unsorted(attrs, counts)
    return AggregateSet(domain, 3, by_len, protected_number_of_records=123456, is_dp=True)


def reference_frame(aggregates: AggregateSet) -> pd.DataFrame:
    """The per-row ``to_frame`` the release used before (its attribute texts built once)."""
    domain = aggregates.domain
    texts = domain.attribute_texts()
    attr_col = domain.attribute_columns()
    offsets = np.asarray(domain.offsets[:-1])
    records: dict[str, list] = {"length": [], "combination": [], "count": []}
    per_col: dict[str, list] = {c: [] for c in domain.columns}
    for k in sorted(aggregates.by_len):
        cc = aggregates.by_len[k]
        for row, c in zip(cc.attrs, cc.counts.tolist(), strict=True):
            records["length"].append(k)
            records["combination"].append(
                ";".join(sorted((texts[int(a)] for a in row), key=lambda s: s.encode()))
            )
            records["count"].append(int(c))
            vals: list[str | None] = [None] * len(domain.columns)
            for a in row.tolist():
                ci = int(attr_col[a])
                vals[ci] = domain.labels[ci][a - int(offsets[ci])]
            for name, v in zip(domain.columns, vals, strict=True):
                per_col[name].append(v)
    frame = pd.DataFrame(
        {
            "length": pd.array(records["length"], dtype="int64"),
            "combination": pd.array(records["combination"], dtype="string"),
            "count": pd.array(records["count"], dtype="int64"),
        }
    )
    for name in domain.columns:
        frame[name] = pd.array(per_col[name], dtype="string")
    return frame


def with_half_width(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with aggregates.parquet's 4th column, null (no noise figure given)."""
    out = frame.copy()
    out.insert(3, "noise_half_width_95", pd.array([None] * len(out), dtype="Float64"))
    return out


def reference_tsv(aggregates: AggregateSet, frame: pd.DataFrame) -> bytes:
    """The pandas ``aggregates.tsv`` writer the release used before."""
    frame = frame.sort_values(
        ["length", "count", "combination"], ascending=[True, False, True], kind="stable"
    )
    lines = [
        "selections\tprotected_count",
        f"record_count\t{int(aggregates.protected_number_of_records or 0)}",
    ]
    lines += [f"{c}\t{n}" for c, n in zip(frame["combination"], frame["count"], strict=True)]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def case() -> AggregateSet:
    """The large raw-domain aggregate set."""
    return large_case()


def test_aggregates_parquet_and_tsv_are_byte_identical(case: AggregateSet) -> None:
    """aggregates.parquet and aggregates.tsv equal the per-row writers' bytes (and known hash)."""
    table = case.to_arrow()
    frame = reference_frame(case)
    assert aggregates_parquet(table) == parquet_bytes(with_half_width(frame))
    tsv = aggregates_tsv(case, table)
    assert tsv == reference_tsv(case, frame)
    assert hashlib.sha256(tsv).hexdigest() == TSV_SHA256_BEFORE


def test_text_forms_agree(case: AggregateSet) -> None:
    """to_text_dict and combination_text give the combination column of the Arrow table."""
    table = case.to_arrow()
    texts = table.column("combination").to_pylist()
    assert list(case.to_text_dict()) == texts
    cc = case.counts_of(3)
    start = len(case.counts_of(1)) + len(case.counts_of(2))
    for i in (0, 17, len(cc) - 1):
        assert case.combination_text(cc.attrs[i]) == texts[start + i]


def test_empty_aggregates_write_the_header_lines() -> None:
    """No combination at all: the TSV is the header and the record count, parquet round-trips."""
    empty = AggregateSet(Domain(("a",), (("x",),)), 2, {}, protected_number_of_records=5)
    table = empty.to_arrow()
    assert table.num_rows == 0
    assert aggregates_tsv(empty, table) == b"selections\tprotected_count\nrecord_count\t5\n"
    assert aggregates_parquet(table) == parquet_bytes(with_half_width(reference_frame(empty)))


@pytest.mark.parametrize(
    ("columns", "fast_path"),
    [
        ({"a": ["x", "", "y"], "b": ["1", "2", "3"]}, True),
        ({"état": ["é", "日本", ""], "c d": ["", "", ""]}, True),
        ({"a": ["", "x"]}, False),  # a lone empty field is quoted: no fast path
        ({"a": ["x,y", "z"]}, False),
        ({"a": ['say "hi"', "z"]}, False),
        ({"a,b": ["x", "y"]}, False),
    ],
)
def test_synthetic_csv_fast_path_is_to_csv(columns: dict[str, list[str]], fast_path: bool) -> None:
    """The Arrow CSV writer gives to_csv's bytes where nothing needs quoting (it ran: bytes, not
    None), and declines exactly where pandas would quote (csv_bytes then gives to_csv's)."""
    frame = pd.DataFrame(columns)
    table = pa.table({k: pa.array(v, pa.large_string()) for k, v in columns.items()})
    fast = arrow_csv_bytes(table)
    expected = frame.to_csv(index=False).encode()
    assert (fast is not None) == fast_path
    assert fast == expected if fast_path else csv_bytes(frame) == expected


@pytest.mark.parametrize("labels", [("1", "10", "1 0", "10;x"), ("1", "10", "1 0", "1:0")])
def test_tsv_order_equals_text_order(labels: tuple[str, ...]) -> None:
    """Ties in the count are ordered by the text byte-wise, with or without ';' in a label
    (integer keys when no text holds ';', the strings themselves otherwise)."""
    domain = Domain(("a", "b", "c"), (tuple(sorted(labels)), ("0", "1"), ("x", "x0")))
    offsets = domain.offsets
    rows = [
        (offsets[0] + i, offsets[1] + j, offsets[2] + m)
        for i in range(4)
        for j in range(2)
        for m in range(2)
    ]
    attrs2 = np.asarray([r[:2] for r in rows][::2], dtype=np.int32)
    by_len = {
        1: CombinationCounts.from_unsorted(
            np.arange(domain.n_attributes, dtype=np.int32).reshape(-1, 1),
            np.full(domain.n_attributes, 7),
        ),
        2: CombinationCounts.from_unsorted(attrs2, np.full(len(attrs2), 3)),
        3: CombinationCounts.from_unsorted(np.asarray(rows, dtype=np.int32), np.full(16, 5)),
    }
    case = AggregateSet(domain, 3, by_len, protected_number_of_records=9, is_dp=True)
    assert aggregates_tsv(case) == reference_tsv(case, reference_frame(case))
