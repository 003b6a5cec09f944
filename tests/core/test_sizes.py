"""The synthesis's size limits from the columns' sizes alone: records' keys and candidate
memory, the consistent model's worst case; the synthesis applies the same rules."""

from __future__ import annotations

import pytest

from sds_core.data.domain import Domain
from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import AggregateSet
from sds_core.synthesis.generator import plan_synthesis
from sds_core.synthesis.sizes import (
    MAX_CANDIDATE_CELLS,
    check_synthesis_size,
    sub_combinations,
    worst_case_model_bytes,
)


def test_worst_case_size_refused_with_column_names() -> None:
    """A domain whose smallest possible model exceeds the limit is refused, naming columns."""
    dom = Domain(
        ("puma", "income", "sex"),
        (tuple(f"p{i:04d}" for i in range(900)), tuple(f"i{i:04d}" for i in range(1500)), ("0",)),
    )
    assert worst_case_model_bytes(dom.columns, dom.cardinalities, 3) > 0
    with pytest.raises(SdsInputError, match=r"income \(1501 values\).*Nothing was charged"):
        worst_case_model_bytes(dom.columns, dom.cardinalities, 3, max_model_bytes=10**5)


@pytest.mark.parametrize(
    ("n_columns", "n_attributes", "r", "match"),
    [
        (11, 120, 3, None),
        (3, 1500, 6, "1500 attributes with reporting_length 6: combination keys overflow"),
        (20, 335_078, 3, None),  # 335,078 x 191 <= 64M
        (20, 335_079, 3, "335079 attributes x 191 sub-combinations per candidate exceed"),
    ],
)
def test_synthesis_size_limits(
    n_columns: int, n_attributes: int, r: int, match: str | None
) -> None:
    """Keys overflow at R·log2(n + 1) >= 62.9; candidates at n x sub-combinations > 64M."""
    assert sub_combinations(20, 3) == 1 + 19 + 171
    assert 335_078 * 191 <= MAX_CANDIDATE_CELLS < 335_079 * 191
    if match is None:
        check_synthesis_size(n_columns, n_attributes, r)
        return
    with pytest.raises(SdsInputError, match=match):
        check_synthesis_size(n_columns, n_attributes, r)


def test_the_synthesis_refuses_what_the_size_check_refuses() -> None:
    """plan_synthesis applies check_synthesis_size to its aggregates' domain (the rule is one)."""
    dom = Domain(("a", "b"), (tuple(f"a{i:04d}" for i in range(1500)), ("x", "y")))
    aggregates = AggregateSet.from_text_dict(
        dom, {"a:a0001": 5, "b:x": 5}, 6, protected_number_of_records=5
    )
    with pytest.raises(SdsInputError, match="1502 attributes with reporting_length 6"):
        check_synthesis_size(dom.n_columns, dom.n_attributes, 6)
    with pytest.raises(SdsInputError, match="1502 attributes with reporting_length 6"):
        plan_synthesis(aggregates)
