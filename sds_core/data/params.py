"""PrepareParams: how a sensitive table becomes records (SDS preprocessing, spec §3.3).

The parameter object of :func:`sds_core.data.preparation.prepare`, apart from the preparation
itself so that the release's parameter form reads its declarations without loading pandas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sds_core.data.text import WHITESPACE, match_key
from sds_core.errors import SdsInputError
from sds_core.param_fields import check_fields, documented, param

if TYPE_CHECKING:
    from sds_core.data.binning import Binning

__all__ = ["PrepareParams"]


def _tuple_of_names(field_name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):  # type: ignore[attr-defined]
        raise SdsInputError(
            f"PrepareParams.{field_name} must be a sequence of column names (strings), "
            f"got {value!r}"
        )
    names: tuple[str, ...] = tuple(value)  # type: ignore[arg-type]
    keys = [match_key(v) for v in names]
    dup = sorted({v for v, k in zip(names, keys, strict=True) if keys.count(k) > 1})
    if dup:
        raise SdsInputError(
            f"PrepareParams.{field_name} names a column twice (matching is case-insensitive): {dup}"
        )
    return names


@documented
@dataclass(frozen=True, slots=True)
class PrepareParams:
    """How to turn a sensitive table into records (SDS preprocessing, spec §3.3).

    Column names are matched trimmed and case-insensitively against the input headers, and
    every name given must exist in the input. Lists and a ``{column: delimiter}`` dict are
    accepted and stored as tuples. Every field is declared once below (default, meaning,
    privacy effect).
    """

    use_columns: tuple[str, ...] = param(
        (),
        doc="Columns to use, in input order; empty = all (a release: all declared columns). "
        "The subject-id column is an attribute too unless left out here (as in the reference).",
        privacy="Fewer columns mean fewer combinations, so less noise per count; the guarantee "
        "is unchanged.",
    )
    sensitive_zeros: tuple[str, ...] = param(
        (),
        doc="Columns where '0' is a value, not an empty cell (elsewhere '0' means empty).",
        privacy="None: it only decides which cells hold a value.",
    )
    multi_value_columns: tuple[tuple[str, str], ...] = param(
        (),
        doc="(column, delimiter) pairs; each such column becomes one binary column "
        "<column>_<value> per distinct value.",
        privacy="Changes which attributes are counted, not the accounting: (ε, δ) is unchanged.",
    )
    subject_id: str | None = param(
        None,
        kind=str,
        optional=True,
        doc="Column whose (trimmed, lower-cased) value identifies the person; rows of one "
        "subject are joined into one record.",
        privacy="Sets the privacy unit: with it, the guarantee protects each subject (all their "
        "rows); without it, each row.",
    )
    record_limit: int | None = param(
        None,
        kind=int,
        ge=0,
        optional=True,
        doc="Use only the first N data rows (before joining); empty = all. (The core also "
        "takes 0 for all, as the reference does; the release form does not.)",
        privacy="None: the limit is public and applied before anything is measured.",
    )
    binning: tuple[Binning, ...] = param(
        (),
        doc="Declared bins for numeric columns (never derived from the data).",
        privacy="Declared in advance, so it reveals nothing; coarser bins mean larger counts "
        "that survive the noise.",
    )
    allow_empty_columns: bool = param(
        False,
        kind=bool,
        doc="Keep columns without any non-empty value (a multi-value one then vanishes, as in "
        "the reference) instead of raising SdsInputError.",
        privacy="None: it only decides between an error and an empty column.",
    )

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "use_columns", _tuple_of_names("use_columns", self.use_columns))
        set_(self, "sensitive_zeros", _tuple_of_names("sensitive_zeros", self.sensitive_zeros))
        mvc = self.multi_value_columns
        pairs = tuple(mvc.items()) if isinstance(mvc, Mapping) else tuple(tuple(p) for p in mvc)
        for pair in pairs:
            if len(pair) != 2 or not all(isinstance(x, str) for x in pair) or not pair[1]:
                raise SdsInputError(
                    "PrepareParams.multi_value_columns entries must be (column, delimiter) pairs "
                    f"of strings with a non-empty delimiter, got {pair!r}"
                )
        _tuple_of_names("multi_value_columns", [p[0] for p in pairs])
        set_(self, "multi_value_columns", pairs)
        from sds_core.data.binning import Binning  # pandas: only once a table is prepared

        binning = tuple(self.binning)
        if not all(isinstance(b, Binning) for b in binning):
            raise SdsInputError(f"PrepareParams.binning must hold Binning objects, got {binning!r}")
        _tuple_of_names("binning", [b.column for b in binning])
        set_(self, "binning", binning)
        both = {match_key(b.column) for b in binning} & {match_key(c) for c, _ in pairs}
        if both:
            raise SdsInputError(
                f"PrepareParams: columns {sorted(both)} are both binned and multi-value; "
                "a column can be one or the other"
            )
        if self.subject_id is not None and (
            not isinstance(self.subject_id, str) or not self.subject_id.strip(WHITESPACE)
        ):
            raise SdsInputError(
                f"PrepareParams.subject_id must be a non-empty column name or None, "
                f"got {self.subject_id!r}"
            )
        check_fields(self)
