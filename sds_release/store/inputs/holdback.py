"""The control rows held back from an input before it is released (privacy-risk evaluation).

anonymeter's attacks compare what the synthetic records reveal about the rows the synthesizer
saw (training) with what they reveal about rows of the same population it never saw (control).
Both ``sds split`` and a release with ``privacy_risk = true`` cut their input here, by Poisson
sampling: each unit (a row, or with a subject id a subject and all its rows) is held back by its
own coin, a keyed hash of the unit's identity (:func:`control_mask`), with probability
:data:`CONTROL_SHARE`. A unit's coin depends on the key and the unit only, so adding a unit to the
input changes no other unit's side: neighbouring inputs have training parts that differ by that
unit alone, which is what makes a release DP with respect to its whole input (docs/privacy.md
§11). A release keys the coins with its release key (a resume or a replay cuts identically); the
control rows are never released (they stay in the private workspace, :data:`CONTROL_FILE`).
"""

from __future__ import annotations

import hashlib
import math
from functools import cache

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from sds_core.errors import SdsInputError

__all__ = [
    "CONTROL_FILE",
    "CONTROL_LABEL",
    "CONTROL_SHARE",
    "MIN_SIDE_ROWS",
    "SIZE_RISK",
    "check_holdback",
    "check_side_sizes",
    "control_mask",
    "hold_back",
    "min_input_units",
    "side_sizes",
    "subject_codes",
]

MIN_SIDE_ROWS = 100
"""Fewest records each side of a split (training and control) must hold. anonymeter attacks
as many control records as training records; with fewer than 100 attacks the 95% interval of
a success rate is wider than ±0.1 (1.96·√(0.25/100) = 0.098), wider than any risk worth
reporting, and a risk cannot be told from zero."""

CONTROL_SHARE = 0.2
"""The chance that each row (or subject) of a ``privacy_risk`` release is held back."""

SIZE_RISK = 1e-6
"""The sides' sizes are random (binomial): the pre-flight asks for an input large enough that
a side falls below :data:`MIN_SIDE_ROWS` with at most this chance (:func:`min_input_units`);
the realised sizes are checked again once the coins are drawn, still before any charge."""

CONTROL_LABEL = "privacy-risk-control"
"""The release key's label of the hold-back coins (:meth:`ReleaseRandomness.record_key`)."""

CONTROL_FILE = "control.parquet"
"""The held-back rows' file in ``private/<release-id>/`` (0600; never published)."""

_SPLITMIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def check_side_sizes(
    training_rows: int,
    control_rows: int,
    *,
    unit: str = "records",
    fix: str = "use a larger input (or a larger --control-share)",
) -> None:
    """Refuse a training or control side smaller than :data:`MIN_SIDE_ROWS`.

    Raises:
        SdsInputError: naming both sizes, the minimum, why, and ``fix``.
    """
    small = min(training_rows, control_rows)
    if small < MIN_SIDE_ROWS:
        raise SdsInputError(
            f"too small for a privacy-risk evaluation: the training side has {training_rows} "
            f"{unit} and the control side {control_rows}; each needs at least {MIN_SIDE_ROWS}, "
            f"because the attacks are run on as many control {unit} as training {unit} and "
            f"with fewer than {MIN_SIDE_ROWS} the 95% interval of a risk is wider than ±0.1; "
            f"{fix}, or skip the privacy-risk evaluation for this data. Nothing was charged or "
            "written."
        )


def _mix(h: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """splitmix64's finalizer, elementwise (a bijection of 64-bit words that mixes every bit)."""
    h = (h ^ (h >> np.uint64(30))) * _SPLITMIX[0]
    h = (h ^ (h >> np.uint64(27))) * _SPLITMIX[1]
    return h ^ (h >> np.uint64(31))


def _cell_bytes(value: object) -> bytes:
    """A cell's value as bytes, one encoding per type (None, text, bytes, anything else)."""
    if value is None:
        return b"\x00"
    if isinstance(value, str):
        return b"\x01" + value.encode("utf-8")
    if isinstance(value, bytes):
        return b"\x02" + value
    return b"\x03" + type(value).__name__.encode() + b"\x00" + repr(value).encode("utf-8")


def _keyed(key: bytes, items: list[bytes]) -> NDArray[np.uint64]:
    """The 64-bit keyed BLAKE2b of each item."""
    out = np.empty(len(items), dtype=np.uint64)
    for i, item in enumerate(items):
        out[i] = int.from_bytes(hashlib.blake2b(item, digest_size=8, key=key).digest(), "little")
    return out


def _column_hashes(key: bytes, name: str, column: pa.ChunkedArray) -> NDArray[np.uint64]:
    """Each row's keyed hash of (column name, cell): computed once per distinct cell value."""
    array = column.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    encoded = array.dictionary_encode(null_encoding="encode")
    prefix = name.encode("utf-8") + b"\x00"
    per_value = _keyed(key, [prefix + _cell_bytes(v) for v in encoded.dictionary.to_pylist()])
    indices: NDArray[np.int64] = np.asarray(
        encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64
    )
    return per_value[indices]


def _occurrences(content: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """0 for the first row of each content, 1 for the next identical row, and so on."""
    order = np.argsort(content, kind="stable")
    ordered = content[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    sizes = np.diff(np.append(starts, ordered.size))
    rank = np.arange(ordered.size, dtype=np.int64) - np.repeat(starts, sizes)
    out = np.empty(ordered.size, dtype=np.uint64)
    out[order] = rank.astype(np.uint64)
    return out


def _unit_hashes(table: pa.Table, key: bytes, subject_id: str | None) -> NDArray[np.uint64]:
    """Each row's unit hash: its subject's (keyed hash of the trimmed, lower-cased id), or
    without a subject id the row's own: the keyed hash of its cells (columns by name) and of
    its occurrence number among identical rows."""
    if subject_id is not None:
        codes, keys = _subject_keys(table, subject_id)
        subjects = _keyed(key, [b"subject\x00" + k.encode("utf-8") for k in keys])
        return subjects[codes]
    content = np.zeros(table.num_rows, dtype=np.uint64)
    for name in sorted(table.column_names):
        content = _mix(content ^ _column_hashes(key, name, table.column(name)))
    copy = _keyed(key, [b"occurrence"])[0]
    return _mix(content ^ _mix(_occurrences(content) + copy))


def _coin_key(seed: int) -> bytes:
    """The BLAKE2b key of the coins drawn from ``seed`` (any integer)."""
    return hashlib.sha256(b"sds-holdback\x00" + str(int(seed)).encode()).digest()


def control_mask(
    table: pa.Table, control_share: float, seed: int, *, subject_id: str | None = None
) -> NDArray[np.bool_]:
    """Which rows of ``table`` go to the control side: each unit by its own coin, heads with
    probability ``control_share``, a keyed hash of the unit and ``seed``.

    A unit is a subject (all its rows: ids matched trimmed and case-insensitively, as the
    release joins them) or, without ``subject_id``, a row: its content (every column, by name)
    and its occurrence number among the rows identical to it. The coin of a unit depends only
    on the seed and the unit: not on the other rows, their order or their number, so the same
    seed and unit give the same side in any input, and adding a unit to an input moves no
    other unit (identical rows are interchangeable, and the k-th copy of a row always gets the
    same coin).

    >>> t = pa.table({"a": ["x", "y", "x", "z"]})
    >>> control_mask(t, 0.5, 7)[:3].tolist() == control_mask(t.slice(0, 3), 0.5, 7).tolist()
    True

    Raises:
        SdsInputError: ``control_share`` is not in (0, 1); a subject id missing in a row.
    """
    if not 0.0 < control_share < 1.0:
        raise SdsInputError(
            f"--control-share must be between 0 and 1 (exclusive), got {control_share}; "
            "0.2 holds back a fifth of the rows"
        )
    threshold = np.uint64(min(int(control_share * 2.0**64), 2**64 - 1))
    return _unit_hashes(table, _coin_key(seed), subject_id) < threshold


def side_sizes(
    table: pa.Table, control: NDArray[np.bool_], subject_id: str | None
) -> tuple[int, int]:
    """(training, control) sizes of a cut: rows, or with ``subject_id`` subjects."""
    if subject_id is None:
        n_control = int(control.sum())
        return table.num_rows - n_control, n_control
    codes, _ = _subject_keys(table, subject_id)
    held = np.zeros(int(codes.max()) + 1 if codes.size else 0, dtype=np.bool_)
    held[codes[control]] = True
    return held.size - int(held.sum()), int(held.sum())


@cache
def min_input_units(control_share: float = CONTROL_SHARE) -> int:
    """The fewest rows (or subjects) whose cut leaves fewer than :data:`MIN_SIDE_ROWS` on a side
    with at most :data:`SIZE_RISK` chance (the control side is Binomial(n, share)).

    >>> min_input_units()
    746
    """

    def short(n: int) -> float:  # P(Bin(n, share) < MIN) + P(Bin(n, 1 - share) < MIN)
        def below(p: float) -> float:
            logs = (
                math.lgamma(n + 1)
                - math.lgamma(k + 1)
                - math.lgamma(n - k + 1)
                + k * math.log(p)
                + (n - k) * math.log1p(-p)
                for k in range(min(MIN_SIDE_ROWS, n + 1))
            )
            return math.fsum(math.exp(x) for x in logs)

        return below(control_share) + below(1.0 - control_share)

    low, high = MIN_SIDE_ROWS, 2 * MIN_SIDE_ROWS
    while short(high) > SIZE_RISK:
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if short(mid) > SIZE_RISK else (low, mid)
    return high


def _subject_keys(table: pa.Table, subject_id: str) -> tuple[NDArray[np.int64], list[str]]:
    """Each row's subject index and the subjects' keys (trimmed, lower-cased ids).

    Raises:
        SdsInputError: no such column, or a row without a subject id.
    """
    import pandas as pd

    from sds_core.data.text import match_key, matching_column

    column = table.column(matching_column(table.column_names, subject_id))
    keys = [match_key("" if v is None else str(v)) for v in column.to_pylist()]
    if any(k == "" for k in keys):
        raise SdsInputError(
            f"subject id column {subject_id!r} has empty cells: every row needs its subject "
            "to be split by subject; fill in or drop those rows"
        )
    codes, distinct = pd.factorize(np.asarray(keys, dtype=object))
    return np.asarray(codes, dtype=np.int64), [str(k) for k in distinct.tolist()]


def subject_codes(table: pa.Table, subject_id: str) -> NDArray[np.int64]:
    """The subject index of each row (trimmed, lower-cased id, as the release joins rows).

    Raises:
        SdsInputError: no such column, or a row without a subject id.
    """
    return _subject_keys(table, subject_id)[0]


_RELEASE_FIX = (
    f"privacy_risk = true holds back each {{one}} with chance {CONTROL_SHARE:.0%} as a control "
    f"{{one}}, so it needs at least {min_input_units()} {{unit}} (then a side falls short with "
    f"chance under {SIZE_RISK:g}): release a larger input"
)


def _fix(unit: str) -> str:
    return _RELEASE_FIX.format(unit=unit, one=unit[:-1])


def check_holdback(table: pa.Table, subject_id: str | None) -> None:
    """Refuse an input too small for a release's hold-back: fewer rows (subjects) than
    :func:`min_input_units` (the pre-flight's check, before the key exists; the realised
    sizes are checked by :func:`hold_back`).

    Raises:
        SdsInputError: fewer rows (subjects) than :func:`min_input_units`.
    """
    if subject_id is None:
        n, unit = table.num_rows, "rows"
    else:
        codes = subject_codes(table, subject_id)
        n, unit = (int(codes.max()) + 1 if codes.size else 0), "subjects"
    if n < min_input_units():
        raise SdsInputError(
            f"too small for a privacy-risk evaluation: the input has {n} {unit}; "
            f"{_fix(unit)}, or skip the privacy-risk evaluation for this data. Nothing was "
            "charged or written."
        )


def hold_back(table: pa.Table, *, seed: int, subject_id: str | None) -> tuple[pa.Table, pa.Table]:
    """``table`` cut into (training, control): each row, or with ``subject_id`` each subject
    (all its rows on one side), held back by its own coin (:func:`control_mask`, probability
    :data:`CONTROL_SHARE`, keyed by ``seed``); rows keep their order on each side.

    Raises:
        SdsInputError: fewer rows (subjects) than :func:`min_input_units`, or a side that
            holds fewer than :data:`MIN_SIDE_ROWS` rows (subjects) once cut.
    """
    check_holdback(table, subject_id)
    control = control_mask(table, CONTROL_SHARE, seed, subject_id=subject_id)
    unit = "rows" if subject_id is None else "subjects"
    check_side_sizes(*side_sizes(table, control, subject_id), unit=unit, fix=_fix(unit))
    return table.filter(pa.array(~control)), table.filter(pa.array(control))
