"""The text rules of SDS preprocessing: trimming, escaping of ``;``/``:``, name matching.

Used by :mod:`sds_core.data.preparation` on every header and cell, and by
:mod:`sds_core.data.zeros` before anything is prepared; no pandas here, so the CLI's pre-flight
can apply the same rules cheaply.
"""

from __future__ import annotations

from collections.abc import Sequence

from sds_core.errors import SdsInputError

__all__ = ["WHITESPACE", "match_key", "matching_column", "normalize_text"]

WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Rust's ``str::trim`` set (Unicode White_Space), which the reference uses; ``str.strip()``
without arguments differs."""


def normalize_text(value: str) -> str:
    """Trim, then escape the reserved ``;`` and ``:`` (SDS header/value normalization).

    >>> normalize_text("  d3;D "), normalize_text("a3:A")
    ('d3<semicolon>D', 'a3<colon>A')
    """
    return value.strip(WHITESPACE).replace(";", "<semicolon>").replace(":", "<colon>")


def match_key(name: str) -> str:
    """Key for case-insensitive, trimmed column matching (and subject ids).

    >>> match_key("  g:senseZeros ")
    'g:sensezeros'
    """
    return name.strip(WHITESPACE).lower()


def matching_column(columns: Sequence[str], name: str, parameter: str = "subject_id") -> str:
    """The column of ``columns`` that ``name`` designates (trimmed, case-insensitive).

    >>> matching_column(["Age", " PID "], "pid")
    ' PID '

    Raises:
        SdsInputError: no such column (names the parameter and the available columns).
    """
    hits = [c for c in columns if match_key(str(c)) == match_key(name)]
    if not hits:
        raise SdsInputError(
            f"PrepareParams.{parameter}: unknown column {name!r}; available columns: "
            f"{list(columns)}"
        )
    return str(hits[0])
