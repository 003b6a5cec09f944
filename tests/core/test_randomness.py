"""Tests for sds_core.dp.randomness: key validation, labelled streams, stage ownership of labels."""

from __future__ import annotations

import numpy as np
import pytest

from sds_core.dp.randomness import KEY_BYTES, ReleaseRandomness
from sds_core.errors import SdsInputError


@pytest.mark.parametrize("key", [b"", bytes(16), bytes(31), bytes(33), "x" * 32, 12345])
def test_key_of_wrong_length_or_type_is_refused(key: object) -> None:
    """Only exactly 32 bytes are a release key; the message says how to get one."""
    with pytest.raises(SdsInputError, match=r"exactly 32 bytes.*fresh"):
        ReleaseRandomness(key)  # type: ignore[arg-type]


def test_fresh_keys_differ_and_have_the_right_size() -> None:
    """fresh() draws a new 256-bit key from the OS each time."""
    a, b = ReleaseRandomness.fresh(), ReleaseRandomness.fresh()
    assert len(a.key) == KEY_BYTES and a.key != b.key


def test_label_reused_by_another_stage_raises() -> None:
    """A noise label belongs to one stage: another stage using it is refused."""
    r = ReleaseRandomness(bytes(32))
    r.words("rel/aggregate-1/gaussian", 3, stage="aggregate-1")
    with pytest.raises(SdsInputError, match="already used by stage 'aggregate-1'"):
        r.words("rel/aggregate-1/gaussian", 3, stage="aggregate-2")


def test_same_label_same_stage_repeats_and_prefix_is_consistent() -> None:
    """Re-reading a label gives the same words; a longer read extends the shorter one."""
    r = ReleaseRandomness.from_seed(7)
    short = r.words("rel/count/laplace", 4, stage="count")
    long = r.words("rel/count/laplace", 10, stage="count")
    assert np.array_equal(short, long[:4])


def test_streams_depend_on_key_and_label() -> None:
    """Different labels or keys give different words; generators are seeded the same way."""
    a, b = ReleaseRandomness.from_seed(1), ReleaseRandomness.from_seed(2)
    wa = a.words("x", 8, stage="s")
    assert not np.array_equal(wa, a.words("y", 8, stage="s"))
    assert not np.array_equal(wa, b.words("x", 8, stage="s"))
    g1, g2 = a.generator("synthesis"), ReleaseRandomness.from_seed(1).generator("synthesis")
    assert np.array_equal(g1.integers(0, 1 << 30, 5), g2.integers(0, 1 << 30, 5))
    assert not np.array_equal(
        a.generator("synthesis").integers(0, 1 << 30, 5),
        a.generator("bounding").integers(0, 1 << 30, 5),
    )


@pytest.mark.parametrize("seed", [-1, 1.5, "3"])
def test_bad_seed_is_refused(seed: object) -> None:
    """Seeds are non-negative integers."""
    with pytest.raises(SdsInputError, match="seed must be a non-negative integer"):
        ReleaseRandomness.from_seed(seed)  # type: ignore[arg-type]


def test_negative_word_count_is_refused() -> None:
    """Asking for a negative number of words is a caller error."""
    with pytest.raises(SdsInputError, match="number of words"):
        ReleaseRandomness(bytes(32)).words("x", -1, stage="s")
