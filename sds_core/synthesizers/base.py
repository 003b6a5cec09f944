"""The synthesizer interface, its budget/fit results and the by-name registry.

Every synthesizer (SDS aggregate-seeded and the seeds' other methods) declares its privacy spend
before touching data (:meth:`Synthesizer.budget`, which the ledger reserves), fits a DP model
(:meth:`Synthesizer.fit`) and samples records from it (:meth:`Synthesizer.sample`, post-processing).
The pipeline picks one with :func:`create` by name, smartnoise-style.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import EMPTY_CODE, Domain
from sds_core.data.table import PreparedTable
from sds_core.dp.accounting import StageSpend
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError, invariant

SynthesizerSpend = StageSpend
"""One ledger charge a synthesizer makes: the product's one spend type (see StageSpend)."""


def pure_spend(stage: str, mechanism: str, epsilon: float, delta: float = 0.0) -> SynthesizerSpend:
    """A charge of an (ε, δ)-DP mechanism; rho = ε²/2 is stated only when δ = 0."""
    rho = epsilon**2 / 2 if delta == 0 else None
    return SynthesizerSpend(stage, mechanism, epsilon, delta, rho)


@dataclass(frozen=True, slots=True, eq=False)
class FitResult:
    """What :meth:`Synthesizer.fit` returns.

    Args:
        spends: the charges actually made (equal to :meth:`Synthesizer.budget`'s answer).
        model: the fitted DP model; every field is a DP quantity (publishable).
        privacy_report: publishable description (mechanisms, parameters, guarantee).
        private_notes: for the custodian's private log ONLY (may describe the data, e.g. values
            present in the data but missing from a declared domain). Never publish.
    """

    spends: tuple[SynthesizerSpend, ...]
    model: Any
    privacy_report: Mapping[str, object]
    private_notes: Mapping[str, object] = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        """Total ε of the spends (basic composition)."""
        return math.fsum(s.epsilon for s in self.spends)

    @property
    def delta(self) -> float:
        """Total δ of the spends (basic composition)."""
        return math.fsum(s.delta for s in self.spends)


@runtime_checkable
class Synthesizer(Protocol):
    """A DP synthesizer: budget → fit (spends the budget) → sample (free post-processing)."""

    name: ClassVar[str]

    def budget(self, epsilon: float, delta: float | None) -> tuple[SynthesizerSpend, ...]:
        """The charges :meth:`fit` will make, computed without the data."""
        ...

    def fit(
        self,
        table: PreparedTable,
        *,
        epsilon: float,
        delta: float | None,
        rnd: ReleaseRandomness,
        release_label: str,
    ) -> FitResult:
        """Spend the budget on ``table`` and keep a DP model for :meth:`sample`."""
        ...

    def sample(self, n: int | None, *, rng: np.random.Generator) -> PreparedTable:
        """``n`` synthetic records (None: the synthesizer's DP default, e.g. the DP count)."""
        ...


_S = TypeVar("_S")
_REGISTRY: dict[str, Callable[..., Synthesizer]] = {}


def register(cls: _S) -> _S:
    """Class decorator: make ``cls`` creatable by its ``name`` (re-registering replaces it)."""
    name = getattr(cls, "name", None)
    invariant(isinstance(name, str) and bool(name), f"synthesizer {cls!r} has no name")
    _REGISTRY[str(name)] = cls  # type: ignore[assignment]
    return cls


def available() -> tuple[str, ...]:
    """Names of the registered synthesizers, sorted."""
    return tuple(sorted(_REGISTRY))


def option_names(name: str) -> tuple[str, ...]:
    """The keyword options ``create(name, ...)`` accepts, in declaration order.

    Raises:
        SdsInputError: unknown name (the message lists the known names).
    """
    import inspect

    factory = _factory(name)
    params = inspect.signature(factory).parameters.values()
    return tuple(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


def _factory(name: str) -> Callable[..., Synthesizer]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise SdsInputError(
            f"unknown synthesizer {name!r}; choose one of {list(available())}"
        ) from None


def create(name: str, **options: object) -> Synthesizer:
    """The synthesizer registered as ``name``, built with ``options``.

    Raises:
        SdsInputError: unknown name (the message lists the known names) or bad options.
    """
    factory = _factory(name)
    try:
        return factory(**options)
    except TypeError as e:
        raise SdsInputError(f"bad options for synthesizer {name!r}: {e}") from e


# --- helpers shared by the synthesizers -------------------------------------------------------


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    """ε must be a finite number > 0."""
    if (
        isinstance(epsilon, bool)
        or not isinstance(epsilon, int | float)
        or not (math.isfinite(epsilon) and epsilon > 0)
    ):
        raise SdsInputError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return float(epsilon)


def check_proportion(value: float, name: str) -> float:
    """A budget proportion must lie in (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise SdsInputError(f"{name} must be in (0, 1), got {value!r}")
    return float(value)


def resolve_columns(domain: Domain, columns: Sequence[str] | None) -> tuple[int, ...]:
    """Indices of ``columns`` (all when None), in table order; unknown names raise."""
    if columns is None:
        return tuple(range(domain.n_columns))
    if isinstance(columns, str):
        raise SdsInputError(f"columns must be a list of column names, got the string {columns!r}")
    if len(columns) == 0:
        raise SdsInputError("columns must name at least one column (or be None for all)")
    if len(set(columns)) != len(columns):
        raise SdsInputError(f"columns must not repeat a name, got {list(columns)}")
    return tuple(sorted(domain.column_index(c) for c in columns))


def select_columns(table: PreparedTable, columns: Sequence[str] | None) -> PreparedTable:
    """``table`` restricted to ``columns`` (all when None), in table order, codes copied."""
    cols = resolve_columns(table.domain, columns)
    domain = table.domain.project([table.domain.columns[i] for i in cols])
    return PreparedTable(domain, np.ascontiguousarray(table.codes[:, list(cols)]))


def cell_index(codes: NDArray[np.int32], cards: Sequence[int]) -> NDArray[np.int64]:
    """Mixed-radix cell of each row of ``codes`` where empty (-1) is the last category."""
    cell = np.zeros(codes.shape[0], dtype=np.int64)
    for j, k in enumerate(cards):
        col = codes[:, j].astype(np.int64)
        cell = cell * (k + 1) + np.where(col == EMPTY_CODE, k, col)
    return cell


def cell_codes(cells: NDArray[np.int64], cards: Sequence[int]) -> NDArray[np.int32]:
    """Inverse of :func:`cell_index` (category ``k`` of a k-valued column becomes -1)."""
    out = np.empty((cells.shape[0], len(cards)), dtype=np.int32)
    rest = cells.copy()
    for j in range(len(cards) - 1, -1, -1):
        k = cards[j]
        c = rest % (k + 1)
        out[:, j] = np.where(c == k, EMPTY_CODE, c)
        rest //= k + 1
    return out


def table_cells(cards: Sequence[int]) -> int:
    """Number of cells of a contingency table whose columns have ``cards`` values (+ empty)."""
    return math.prod(k + 1 for k in cards)


def check_table_size(cards: Sequence[int], columns: Sequence[str], max_cells: int) -> int:
    """Cells of the contingency table; raises SdsInputError naming the size when too large."""
    cells = table_cells(cards)
    if cells > max_cells:
        raise SdsInputError(
            f"contingency table over columns {list(columns)} has {cells:.3e} cells (each column's "
            f"values + empty), above max_cells={max_cells:.0e}; choose fewer or coarser columns "
            "or raise max_cells if memory allows (~40 bytes per cell)"
        )
    return cells


def sample_cells(
    weights: NDArray[np.float64], n: int, *, rng: np.random.Generator
) -> NDArray[np.int64]:
    """``n`` cell indices drawn i.i.d. proportionally to non-negative ``weights``.

    All-zero weights (everything suppressed by noise) return -1 for every draw.
    """
    total = float(weights.sum())
    if n == 0 or total <= 0:
        return np.full(n, -1, dtype=np.int64)
    cdf = np.cumsum(weights / total)
    cdf[-1] = 1.0
    return np.searchsorted(cdf, rng.random(n), side="right").astype(np.int64)


def check_n(n: int | None, default: int) -> int:
    """The number of records to sample: ``n`` (>= 0) or ``default`` when None."""
    if n is None:
        return max(int(default), 0)
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise SdsInputError(f"n must be a non-negative integer or None, got {n!r}")
    return int(n)


def dp_record_count(
    n_records: int, epsilon: float, *, rnd: ReleaseRandomness, label: str, stage: str
) -> int:
    """The record count + discrete Laplace(1/ε) noise, clamped at 0 (ε-DP, add/remove)."""
    from sds_core.dp import noise

    z = noise.discrete_laplace(rnd, label, scale=1.0 / epsilon, size=1, stage=stage)
    return max(int(n_records) + int(z[0]), 0)


def restrict_labels(
    domain: Domain, keep: Sequence[NDArray[np.bool_]]
) -> tuple[Domain, tuple[NDArray[np.int32], ...]]:
    """Keep only the labels flagged in ``keep`` (one bool array per column).

    Returns the smaller domain and, per column, the map old code -> new code (-1 if dropped).
    """
    labels = []
    maps = []
    for labs, mask in zip(domain.labels, keep, strict=True):
        new = np.full(len(labs), EMPTY_CODE, dtype=np.int32)
        new[mask] = np.arange(int(mask.sum()), dtype=np.int32)
        maps.append(new)
        labels.append(tuple(lab for lab, m in zip(labs, mask.tolist(), strict=True) if m))
    return Domain(domain.columns, tuple(labels)), tuple(maps)


def laplace_tv_per_draw(epsilon: float) -> float:
    """Total-variation bound of one discrete-Laplace(1/ε) table draw (see noise.table_delta).

    Reported (data-independently) so the ledger can add (1 + e^ε)·draws·tv to δ if it wants.
    """
    from sds_core.dp import noise

    return noise.noise_table("laplace", 1.0 / epsilon).tv_per_draw
