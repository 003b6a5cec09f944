"""A dataset's privacy unit: what one record of its budget is, rows or subjects of one column.

A budget bounds what every release of a dataset spends on one record, so all its releases must
count the same record: a row (no ``subject_id``), or a subject (the rows sharing one value of
the ``subject_id`` column, which counts in the first period it is released in). A release that
counts rows would read, in its period, a subject already counted in another period, and one
that counts subjects by another column would join other rows into a record. So each reservation
records its release's unit, and the ledger refuses a release whose unit is not the one of the
dataset's earlier releases (those that may spend: any but a cancelled one that spent nothing).
Reservations made before units were recorded set no unit.
"""

from __future__ import annotations

from sds_core.data.text import match_key

__all__ = ["ROWS", "privacy_unit", "unit_refusal", "unit_text"]

ROWS = "rows"
"""The unit of a dataset without a subject id: each row is a record."""
_SUBJECTS = "subjects:"


def privacy_unit(subject_id: str | None) -> str:
    """The unit of a release whose ``subject_id`` is given (None: rows), as the ledger records
    it: the column as a subject id is matched (trimmed, case-insensitive).

    >>> privacy_unit(None), privacy_unit(" PID ")
    ('rows', 'subjects:pid')
    """
    return ROWS if subject_id is None else _SUBJECTS + match_key(subject_id)


def unit_text(unit: str) -> str:
    """A unit as a sentence reads it.

    >>> unit_text("rows"), unit_text("subjects:pid")
    ('rows (no subject_id)', "subjects (subject_id = 'pid')")
    """
    if unit.startswith(_SUBJECTS):
        return f"subjects (subject_id = {unit.removeprefix(_SUBJECTS)!r})"
    return "rows (no subject_id)"


def unit_refusal(dataset: str, unit: str, kept: str, by: str) -> str | None:
    """Why a release counting ``unit`` cannot spend from ``dataset``, whose release ``by``
    counts ``kept`` (None: the same unit)."""
    if unit == kept:
        return None
    return (
        f"dataset {dataset!r} counts {unit_text(kept)} (release {by!r} and the others before "
        f"this one), but this release counts {unit_text(unit)}: every release of a dataset must "
        "count the same record, or a record's budget is not what holds (a subject counted in "
        "one period would be read again by a release counting rows in another). Release with "
        "the dataset's config (its subject_id), or give these releases a dataset id of their "
        "own (--dataset NEW, with its own budget). Nothing was read or charged."
    )
