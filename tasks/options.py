"""Prefect task options shared by the stage tasks."""

from __future__ import annotations

from typing import Any

from prefect.cache_policies import NO_CACHE

SENSITIVE: dict[str, Any] = {"persist_result": False, "cache_policy": NO_CACHE}
"""For every task that touches the sensitive table or exact counts: no result store, no cache."""
