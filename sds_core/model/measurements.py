"""Noisy marginal measurements and their negative log-likelihood (Gaussian and censored).

A :class:`Measurement` says: the cells ``cells`` of the marginal over ``columns`` were measured
with Gaussian noise of scale ``sigma``; either the noisy values are known (``censored=False``)
or only that each fell at or below a threshold (``censored=True``: a suppressed combination).
Both likelihoods are log-concave, so the fit in :mod:`sds_core.model.estimation` is convex.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import _inline, _jit
from sds_core.errors import SdsInputError, invariant
from sds_core.model.structure import Clique

_ERFC = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def log_erfc_pos(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """log erfc(x) for x >= 0 (Chebyshev fit, relative error of erfc < 1.2e-7), no underflow.

    >>> float(np.round(np.exp(log_erfc_pos(np.array([0.5])))[0], 6))
    0.4795
    """
    t = 1.0 / (1.0 + 0.5 * x)
    poly = np.zeros_like(x)
    for c in reversed(_ERFC[1:]):
        poly = (poly + c) * t
    return np.log(t) - x * x + _ERFC[0] + poly


_LOG_2 = math.log(2.0)
_SQRT_2 = math.sqrt(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


@_inline
def _log_erfc_pos_one(x: float) -> float:  # pragma: no cover - compiled
    """:func:`log_erfc_pos` of one value (the same polynomial, for the compiled kernels)."""
    t = 1.0 / (1.0 + 0.5 * x)
    poly = 0.0
    for k in range(9, 0, -1):
        poly = (poly + _ERFC[k]) * t
    return math.log(t) - x * x + _ERFC[0] + poly


@_jit
def _gaussian_into(  # pragma: no cover - compiled
    flat: NDArray[np.float64],
    cells: NDArray[np.int64],
    values: NDArray[np.float64],
    sigma: float,
    grad: NDArray[np.float64],
) -> float:
    """Σ (μ − y)² / (2σ²) over the cells; adds (μ − y)/σ² to ``grad`` at each (unique) cell."""
    loss = 0.0
    for i in range(cells.size):
        c = cells[i]
        diff = (flat[c] - values[i]) / sigma
        grad[c] += diff / sigma
        loss += diff * diff
    return 0.5 * loss


@_jit
def _censored_into(  # pragma: no cover - compiled
    flat: NDArray[np.float64],
    cells: NDArray[np.int64],
    values: NDArray[np.float64],
    sigma: float,
    grad: NDArray[np.float64],
) -> float:
    """−Σ log Φ((t − μ)/σ) over the cells; adds φ/(σΦ) at each (unique) cell."""
    loss = 0.0
    for i in range(cells.size):
        c = cells[i]
        z = (values[i] - flat[c]) / sigma
        x = -z / _SQRT_2
        if x >= 0:
            log_cdf = _log_erfc_pos_one(x) - _LOG_2
        else:
            log_cdf = math.log1p(-0.5 * math.exp(_log_erfc_pos_one(-x)))
        log_pdf = -0.5 * z * z - _HALF_LOG_2PI
        grad[c] += math.exp(log_pdf - log_cdf) / sigma
        loss -= log_cdf
    return loss


def log_ndtr(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """log Φ(z), the standard normal CDF, stable for very negative z.

    >>> [round(float(v), 4) for v in np.exp(log_ndtr(np.array([-1.0, 0.0, 2.0])))]
    [0.1587, 0.5, 0.9772]
    """
    x = -z / math.sqrt(2.0)
    out = np.empty_like(z)
    neg = x >= 0  # z <= 0: Φ(z) = erfc(x)/2 directly
    out[neg] = log_erfc_pos(x[neg]) - math.log(2.0)
    pos = ~neg  # z > 0: Φ(z) = 1 - erfc(-x)/2
    out[pos] = np.log1p(-0.5 * np.exp(log_erfc_pos(-x[pos])))
    return out


@dataclass(frozen=True, slots=True, eq=False)
class Measurement:
    """Noisy counts of some cells of the marginal over ``columns``.

    Args:
        columns: the marginal's columns (ascending indices).
        cells: flat (C-order) indices of the measured cells in that marginal's table, unique.
        values: the noisy counts (``censored=False``) or the thresholds they fell at or below
            (``censored=True``).
        sigma: standard deviation of the noise on each cell (> 0).
        censored: False for published noisy counts, True for suppressed combinations.
    """

    columns: Clique
    cells: NDArray[np.int64]
    values: NDArray[np.float64]
    sigma: float
    censored: bool = False

    def __post_init__(self) -> None:
        # the compiled kernels read int64 cells and float64 values, contiguous
        object.__setattr__(self, "cells", np.ascontiguousarray(self.cells, dtype=np.int64))
        object.__setattr__(self, "values", np.ascontiguousarray(self.values, dtype=np.float64))
        invariant(self.cells.shape == self.values.shape, "one value per measured cell")
        invariant(self.cells.ndim == 1, "measured cells are a flat index array")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise SdsInputError(f"measurement noise sigma must be > 0, got {self.sigma!r}")

    def check_cells(self, size: int) -> None:
        """InternalError unless every measured cell is a flat index of a ``size``-cell table."""
        invariant(
            not self.cells.size or (int(self.cells.min()) >= 0 and int(self.cells.max()) < size),
            f"measurement over columns {self.columns}: cells outside its {size}-cell marginal",
        )

    def add_loss_and_grad(self, flat: NDArray[np.float64], grad: NDArray[np.float64]) -> float:
        """Negative log-likelihood at the flat (C-order) model marginal ``flat`` over
        ``columns``; its gradient is added to ``grad`` (same length) in place.

        Gaussian: Σ (μ − y)² / (2σ²). Censored (Tobit): −Σ log Φ((t − μ)/σ). One compiled pass
        over the measured cells, no temporary of the marginal's size.
        """
        kernel = _censored_into if self.censored else _gaussian_into
        return float(kernel(flat, self.cells, self.values, float(self.sigma), grad))

    def loss_and_grad(self, marginal: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """Negative log-likelihood at the model ``marginal`` (over ``columns``) and its gradient."""
        flat = np.ascontiguousarray(marginal, dtype=np.float64).reshape(-1)
        self.check_cells(flat.size)
        grad = np.zeros_like(flat)
        loss = self.add_loss_and_grad(flat, grad)
        return loss, grad.reshape(np.shape(marginal))
