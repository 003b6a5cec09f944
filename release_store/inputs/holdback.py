"""The control rows held back from an input before it is released (privacy-risk evaluation).

anonymeter's attacks compare what the synthetic records reveal about the rows the synthesizer
saw (training) with what they reveal about rows of the same population it never saw (control).
Both ``sds split`` and a release with ``privacy_risk = true`` cut their input here: a permutation
of its rows (or of its subjects, all rows of a person on one side) drawn from a seed (a
release: from its key, so a resume or a replay cuts identically), :data:`CONTROL_SHARE` of them
held back. A release is then DP with respect to the training part only; the control rows are
never released (they stay in the private workspace, :data:`CONTROL_FILE`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from sds_core.errors import SdsInputError

__all__ = [
    "CONTROL_FILE",
    "CONTROL_LABEL",
    "CONTROL_SHARE",
    "MIN_SIDE_ROWS",
    "check_holdback",
    "check_side_sizes",
    "control_mask",
    "hold_back",
    "min_input_units",
    "subject_codes",
]

MIN_SIDE_ROWS = 100
"""Fewest records each side of a split (training and control) must hold. anonymeter attacks
as many control records as training records; with fewer than 100 attacks the 95% interval of
a success rate is wider than ±0.1 (1.96·√(0.25/100) = 0.098), wider than any risk worth
reporting, and a risk cannot be told from zero."""

CONTROL_SHARE = 0.2
"""The share of a ``privacy_risk`` release's rows (or subjects) held back as control rows."""

CONTROL_LABEL = "privacy-risk-control"
"""The release key's label of the hold-back permutation (:meth:`ReleaseRandomness.record_key`)."""

CONTROL_FILE = "control.parquet"
"""The held-back rows' file in ``private/<release-id>/`` (0600; never published)."""


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


def control_mask(n: int, control_share: float, seed: int) -> NDArray[np.bool_]:
    """Which of ``n`` units go to the control side: exactly ``round(n·share)`` of them, chosen
    by a permutation drawn from ``seed`` (the same seed and ``n`` give the same split).

    >>> control_mask(10, 0.2, seed=7).sum()
    np.int64(2)

    Raises:
        SdsInputError: ``control_share`` is not in (0, 1).
    """
    if not 0.0 < control_share < 1.0:
        raise SdsInputError(
            f"--control-share must be between 0 and 1 (exclusive), got {control_share}; "
            "0.2 holds back a fifth of the rows"
        )
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    mask = np.zeros(n, dtype=np.bool_)
    mask[rng.permutation(n)[: round(n * control_share)]] = True
    return mask


def min_input_units(control_share: float = CONTROL_SHARE) -> int:
    """The fewest rows (or subjects) whose split leaves :data:`MIN_SIDE_ROWS` on both sides.

    >>> min_input_units()
    498
    """
    n = MIN_SIDE_ROWS
    while min(n - round(n * control_share), round(n * control_share)) < MIN_SIDE_ROWS:
        n += 1
    return n


def subject_codes(table: pa.Table, subject_id: str) -> NDArray[np.int64]:
    """The subject index of each row (trimmed, lower-cased id, as the release joins rows).

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
    codes, _ = pd.factorize(np.asarray(keys, dtype=object))
    return np.asarray(codes, dtype=np.int64)


_RELEASE_FIX = (
    f"privacy_risk = true holds back {CONTROL_SHARE:.0%} of the input as control rows, so it "
    f"needs at least {min_input_units()} {{unit}}: release a larger input"
)


def _units(table: pa.Table, subject_id: str | None) -> tuple[NDArray[np.int64] | None, int, str]:
    if subject_id is None:
        return None, table.num_rows, "rows"
    codes = subject_codes(table, subject_id)
    return codes, (int(codes.max()) + 1 if codes.size else 0), "subjects"


def check_holdback(table: pa.Table, subject_id: str | None) -> None:
    """Refuse an input too small for a release's hold-back (the pre-flight's check; the
    sizes do not depend on the key).

    Raises:
        SdsInputError: a side would hold fewer than :data:`MIN_SIDE_ROWS` rows (subjects).
    """
    _check_units(*_units(table, subject_id)[1:])


def _check_units(n: int, unit: str) -> None:
    n_control = round(n * CONTROL_SHARE)
    check_side_sizes(n - n_control, n_control, unit=unit, fix=_RELEASE_FIX.format(unit=unit))


def hold_back(table: pa.Table, *, seed: int, subject_id: str | None) -> tuple[pa.Table, pa.Table]:
    """``table`` cut into (training, control): :data:`CONTROL_SHARE` of its rows, or with
    ``subject_id`` of its subjects (all rows of a subject on one side), chosen by a permutation
    drawn from ``seed``; rows keep their order on each side.

    Raises:
        SdsInputError: a side would hold fewer than :data:`MIN_SIDE_ROWS` rows (subjects).
    """
    codes, n, unit = _units(table, subject_id)
    _check_units(n, unit)
    chosen = control_mask(n, CONTROL_SHARE, seed)
    control = chosen if codes is None else chosen[codes]
    return table.filter(pa.array(~control)), table.filter(pa.array(control))
