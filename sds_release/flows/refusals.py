"""A release refused before anything was read or charged: the one place that catches it.

A caller's mistake (:class:`~sds_core.errors.SdsInputError`: a bad option, a period a run may not
choose, no budget left) stops a release before its first charge. The flows and the command line
each tell it their own way (the run's log and the run journal, or one paragraph and an exit
status): :func:`refusals` runs their block and hands such a refusal to them. Imports nothing
heavy: the command line uses it before Prefect is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sds_core.errors import SdsInputError

__all__ = ["refusals"]


@contextmanager
def refusals(told: Callable[[SdsInputError], BaseException | None]) -> Iterator[None]:
    """Run the block; a refusal it raises goes to ``told`` first, then is raised again (or the
    exception ``told`` returns instead, without the refusal's traceback)."""
    try:
        yield
    except SdsInputError as e:
        instead = told(e)
        if instead is None:
            raise
        raise instead from None
