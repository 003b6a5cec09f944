"""The two error families of the project.

Caller mistakes raise :class:`SdsInputError` (a ``ValueError``) whose message names the
parameter, column or row, the rule that was broken and how to fix it. Broken invariants
raise :class:`SdsInternalError` (an ``AssertionError``): those are bugs, never user errors.
"""

from __future__ import annotations


class SdsInputError(ValueError):
    """Bad input from the caller: names the parameter/column/row, the rule and the fix."""


class SdsInternalError(AssertionError):
    """An internal invariant does not hold: this is a bug in sds_core, please report it."""


def require(condition: bool, message: str) -> None:
    """Raise :class:`SdsInputError` with ``message`` unless ``condition`` holds.

    >>> require(1 > 0, "never raised")
    >>> require(False, "epsilon must be > 0, got -1")
    Traceback (most recent call last):
    ...
    sds_core.errors.SdsInputError: epsilon must be > 0, got -1
    """
    if not condition:
        raise SdsInputError(message)


def invariant(condition: bool, message: str) -> None:
    """Raise :class:`SdsInternalError` unless ``condition`` holds (internal checks only)."""
    if not condition:
        raise SdsInternalError(f"internal invariant violated (bug): {message}")
