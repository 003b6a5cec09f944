"""CSV ingest: the Arrow fast path reads exactly what the row-by-row reader reads."""

from __future__ import annotations

from pathlib import Path

import pytest

import sds_release.store.inputs.ingest as ingest
from sds_core.errors import SdsInputError

CASES = [
    "a,b\n1,2\n\n3,4\n",
    "a,b\r\n1,2\r\n3,4\r\n",
    "a,b\r1,2\r3,4",
    "\ufeffa,b\n1,\n,2\n",
    "a,b\n 1 , 2 \n",
    "a,b\nx y,2\n\n\n",
    'a,b\n"1,5",2\n',  # quotes: row-by-row reader only
    "a;b\n1;2\n",
    "a,b\n1,2\n3\n",
    "a,b\n1,2,3\n",
    "a,b\n",
]


def _read(path: Path) -> object:
    try:
        return ingest.read_table(path).to_pydict()
    except SdsInputError as e:
        return f"error: {e}"


@pytest.mark.parametrize("text", CASES)
def test_fast_path_equals_row_reader(text: str, tmp_path: Path, monkeypatch) -> None:
    """Same table (or the same error message) with and without the Arrow parser."""
    path = tmp_path / "in.csv"
    path.write_text(text, encoding="utf-8", newline="")
    fast = _read(path)
    monkeypatch.setattr(ingest, "_read_csv_arrow", lambda *a: None)
    assert fast == _read(path)


def test_fast_path_is_taken_for_plain_files(tmp_path: Path) -> None:
    """A quote-free file is parsed by Arrow; a quoted one falls back (None)."""
    data = b"a,b\n1,2\n3,4\n"
    assert ingest._read_csv_arrow(data, ",", ["a", "b"]).to_pydict() == {
        "a": ["1", "3"],
        "b": ["2", "4"],
    }
    assert ingest._read_csv_arrow(b'a,b\n"1",2\n', ",", ["a", "b"]) is None
