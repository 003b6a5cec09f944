"""Bitsets of the aggregates for the completion kernel (used by sds_core.synthesis.layout).

With a dense pair table, the valid candidates of a column are the intersection of a few sets:
attributes with budget (or a 1-count), the pair partners of every attribute of the record, and
the third attributes of every pair of the record. Each set is a row of 64-bit words, column by
column (column ``c`` owns words ``colw[c]..colw[c + 1]``, bit ``i`` of the column is attribute
``col_lo[c] + i``), so one column's candidates cost a few word ANDs instead of list walks. The
position of a triple in its pair's CSR list is the number of set bits before it (``cum3`` holds
the count before each word), which is how the kernel reads its count without searching.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import HAVE_NUMBA, _jit

BITSET_BYTES_LIMIT = 1 << 30
"""Largest triple bitset (+ rank counts) built; beyond it the kernel walks the CSR lists."""

if HAVE_NUMBA:
    from numba.core.config import DISABLE_JIT  # type: ignore[attr-defined]  # set from env
else:  # pragma: no cover - numba absent
    DISABLE_JIT = True

if not DISABLE_JIT:  # intrinsics exist only in compiled code (not under NUMBA_DISABLE_JIT=1)
    from llvmlite import ir
    from numba import types
    from numba.core.extending import intrinsic

    @intrinsic
    def popcount64(typingctx: Any, x: Any) -> Any:
        """Number of set bits of a uint64 (the CPU's popcnt)."""
        sig = types.uint64(types.uint64)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.ctpop(args[0])

        return sig, codegen

    @intrinsic
    def ctz64(typingctx: Any, x: Any) -> Any:
        """Index of the lowest set bit of a non-zero uint64 (the CPU's tzcnt)."""
        sig = types.uint64(types.uint64)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

        return sig, codegen

else:  # pragma: no cover - plain Python fallback (numba absent or disabled)

    def popcount64(x: Any) -> int:  # type: ignore[misc]  # same name as the intrinsic above
        return bin(int(x)).count("1")

    def ctz64(x: Any) -> int:  # type: ignore[misc]  # same name as the intrinsic above
        v = int(x)
        return (v & -v).bit_length() - 1


class Bitsets(NamedTuple):
    """Word offsets per column, pair partners per attribute, thirds per pair (+ rank counts).

    Rows are flattened, ``words`` words each: ``has1`` one row (attributes with a 1-count),
    ``b2`` one row per attribute (its reported pair partners), ``b3`` and ``cum3`` one row per
    reported pair (its reported third attributes; set bits before each word).
    """

    enabled: bool
    colw: NDArray[np.int64]
    has1: NDArray[np.uint64]
    b2: NDArray[np.uint64]
    b3: NDArray[np.uint64]
    cum3: NDArray[np.int32]

    @property
    def words(self) -> int:
        """Words per row (all columns)."""
        return int(self.colw[-1])


def disabled_bitsets(n_cols: int) -> Bitsets:
    """Dummies for the kernels when the bitset path is off (no words in any column)."""
    z = np.zeros(1, dtype=np.uint64)
    colw = np.zeros(n_cols + 1, np.int64)
    return Bitsets(False, colw, z, z.copy(), z.copy(), np.zeros(1, np.int32))


def build_bitsets(
    col_sizes: NDArray[np.int64],
    attr_col: NDArray[np.int64],
    col_lo: NDArray[np.int64],
    idx1: NDArray[np.int64],
    pairs: NDArray[np.int64] | None,
    csr_start: NDArray[np.int64],
    third: NDArray[np.int32],
    pair_first: int,
    n_pairs: int,
) -> Bitsets:
    """Bitsets over one domain; ``pairs`` (m, 2) are the reported pairs, CSR lists by pair."""
    colw = np.zeros(col_sizes.size + 1, dtype=np.int64)
    colw[1:] = np.cumsum((col_sizes + 63) // 64)
    W = int(colw[-1])
    if n_pairs * W * 12 > BITSET_BYTES_LIMIT:
        return disabled_bitsets(col_sizes.size)
    word_of = colw[attr_col] + (np.arange(attr_col.size) - col_lo[attr_col]) // 64
    bit_of = ((np.arange(attr_col.size) - col_lo[attr_col]) % 64).astype(np.uint64)
    has1 = np.zeros(max(W, 1), dtype=np.uint64)
    _set_bits(
        has1.reshape(1, -1),
        np.zeros(int((idx1 >= 0).sum()), np.int64),
        np.flatnonzero(idx1 >= 0),
        word_of,
        bit_of,
    )
    b2 = np.zeros((attr_col.size, max(W, 1)), dtype=np.uint64)
    if pairs is not None and len(pairs):
        _set_bits(b2, pairs[:, 0], pairs[:, 1], word_of, bit_of)
        _set_bits(b2, pairs[:, 1], pairs[:, 0], word_of, bit_of)
    b3 = np.zeros((max(n_pairs, 1), max(W, 1)), dtype=np.uint64)
    cum3 = np.zeros(b3.shape, dtype=np.int32)
    if n_pairs and third.size:
        _fill_b3(b3, cum3, csr_start, third, pair_first, n_pairs, word_of, bit_of)
    return Bitsets(True, colw, has1, b2.ravel(), b3.ravel(), cum3.ravel())


@_jit
def _set_bits(
    rows: np.ndarray, row: np.ndarray, attr: np.ndarray, word_of: np.ndarray, bit_of: np.ndarray
) -> None:
    """rows[row[i]] gets attribute attr[i]'s bit."""
    for i in range(row.shape[0]):
        a = attr[i]
        rows[row[i], word_of[a]] |= np.uint64(1) << bit_of[a]


@_jit
def _fill_b3(
    b3: np.ndarray,
    cum3: np.ndarray,
    csr_start: np.ndarray,
    third: np.ndarray,
    pair_first: int,
    n_pairs: int,
    word_of: np.ndarray,
    bit_of: np.ndarray,
) -> None:
    """Thirds of each pair's CSR list as bits; cum3 = set bits before each word of the row."""
    W = b3.shape[1]
    for pl in range(n_pairs):
        p = pair_first + pl
        for e in range(csr_start[p], csr_start[p + 1]):
            a = third[e]
            b3[pl, word_of[a]] |= np.uint64(1) << bit_of[a]
        acc = 0
        for w in range(W):
            cum3[pl, w] = acc
            acc += popcount64(b3[pl, w])  # type: ignore[call-arg]  # intrinsic: no typingctx


@_jit
def available_bits(row: np.ndarray, avail: np.ndarray, lay: Any) -> None:
    """Set ``row`` to the bits of the attributes with budget left (``avail > 0``).

    ``lay`` is the :class:`sds_core.synthesis.layout.Layout` (columns and ``bitsets.colw``).
    """
    row[:] = 0
    for a in range(avail.shape[0]):
        if avail[a] > 0:
            c = lay.attr_col[a]
            la = a - lay.col_lo[c]
            row[lay.bitsets.colw[c] + la // 64] |= np.uint64(1) << np.uint64(la % 64)
