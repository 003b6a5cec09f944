"""synthetic.csv bytes: the fast Arrow path writes exactly what pandas' to_csv writes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.csv as pacsv
import pytest

from sds_release.store.workspace.encoding import csv_bytes as _csv_bytes


@pytest.mark.parametrize("special", [None, "a,b", 'say "hi"', "two\nlines", "cr\rx", float("nan")])
def test_csv_bytes_equal_pandas(special: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain labels (Arrow path) and labels needing quotes or NaN (pandas path) match to_csv;
    the Arrow writer runs for the plain labels only."""
    arrow_writes: list[object] = []
    write_csv = pacsv.write_csv
    monkeypatch.setattr(
        pacsv, "write_csv", lambda *a, **k: (arrow_writes.append(a[0]), write_csv(*a, **k))[1]
    )
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"state": rng.choice(["6", "36", ""], 300), "age bin": rng.choice(["18-25", "65+"], 300)}
    )
    if special is not None:
        frame.loc[7, "age bin"] = special
    assert _csv_bytes(frame) == frame.to_csv(index=False).encode()
    assert len(arrow_writes) == (1 if special is None else 0)
