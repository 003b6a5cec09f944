"""Prefect task options shared by the stage tasks."""

from __future__ import annotations

import logging
from typing import Any

from prefect import get_run_logger
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError

SENSITIVE: dict[str, Any] = {"persist_result": False, "cache_policy": NO_CACHE}
"""For every task that touches the sensitive table or exact counts: no result store, no cache."""


def task_logger() -> logging.Logger | logging.LoggerAdapter[Any]:
    """The Prefect run logger inside a task run; a plain logger when a stage body runs on its
    own (the replay audit calls ``task.fn`` outside any flow run)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("sds.stages")
