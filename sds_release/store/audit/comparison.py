"""What a replay compares and how it reports it: the parameters it runs with, the manifest keys
it compares, deep equality of checkpointed values, and its :class:`Check` and
:class:`ReplayReport`. Pure comparisons (no files, no runs): :mod:`sds_release.store.audit.replay`
loads the recorded release, reruns it and makes the checks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import PurePath
from typing import Any

from sds_release.store.config.sources import public_input

__all__ = [
    "DIFFERS",
    "LOCAL_ONLY",
    "MATCH",
    "NOTE",
    "NOT_RECORDED",
    "RUN_FACTS",
    "Check",
    "ReplayReport",
    "manifest_differences",
    "published_form",
    "replay_parameters",
    "same_value",
    "value_differences",
]

RUN_FACTS = ("created_at", "finished_at", "stages", "ledger_head", "dataset_budget", "versions")
"""Manifest keys that record how a run went, not what it computed: never compared byte for byte
(stage *names* are compared; versions are reported when they differ). ``finished_at`` and
``dataset_budget`` are in manifests made before they left the public manifest."""

LOCAL_ONLY: dict[str, Any] = {"executor": "local", "dask_address": None, "publish_to": None}
"""Where a release was computed (a Dask cluster) and where a copy went (``publish_to``) do not
change its keyed result; a replay always runs locally and copies nothing. Applied only to the
keys a release recorded."""

MATCH, DIFFERS, NOT_RECORDED, NOTE = "match", "differs", "not recorded", "note"


@dataclass(frozen=True, slots=True)
class Check:
    """One comparison of the replay with the release.

    Attributes:
        stage: the stage it belongs to (a registry name, or ``parameters`` / ``stages``).
        subject: what was compared (``checkpoint``, an artifact name, ``manifest.json``...).
        status: ``match``, ``differs``, ``not recorded`` (the release kept nothing to compare
            with) or ``note`` (informational, never a difference).
        detail: one line for people; never a value of the data (only hashes of published
            files, key names, stage names).
    """

    stage: str
    subject: str
    status: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """Every comparison of one replay and the replay's own stage timings."""

    release_id: str
    dataset: str
    input: str
    checks: tuple[Check, ...]
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        """No comparison differs: the published release is what the recorded method produces."""
        return not any(c.status == DIFFERS for c in self.checks)

    @property
    def differences(self) -> tuple[Check, ...]:
        """The comparisons that differ."""
        return tuple(c for c in self.checks if c.status == DIFFERS)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (for ``--json``)."""
        return {**asdict(self), "identical": self.identical}


def replay_parameters(
    recorded: Mapping[str, Any], *, input_path: str, home: str, seed: int | None
) -> dict[str, Any]:
    """The parameters a replay runs with: the recorded ones, its input, home and the seed.

    The config file is not read again (the recorded parameters already hold its values), and a
    release computed on a cluster is replayed locally (:data:`LOCAL_ONLY`).

    >>> replay_parameters({"epsilon": 2.0, "executor": "dask", "config": "x.toml"},
    ...                   input_path="in.csv", home="/tmp/h", seed=None)["executor"]
    'local'
    """
    data = dict(recorded)
    data.update(input=input_path, home=home, seed=seed, config=None)
    data.update({k: v for k, v in LOCAL_ONLY.items() if k in recorded})
    return data


def published_form(private: Mapping[str, Any]) -> dict[str, Any]:
    """The private parameter record as the manifest publishes it (ReleaseParams.public_dict):
    input and config by file name, no home, no ledger, no ``publish_to``.

    >>> published_form({"input": "/data/in.csv", "config": None, "home": "/h", "ledger": None})
    {'input': 'in.csv', 'config': None}
    """
    out = {k: v for k, v in private.items() if k not in ("home", "ledger", "publish_to")}
    if out.get("input") is not None:
        out["input"] = public_input(out["input"])
    if out.get("config") is not None:
        out["config"] = PurePath(out["config"]).name
    return out


def value_differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted key paths where two JSON values differ (dicts recursed; anything else whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            out += value_differences(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [prefix.rstrip(".") or "(whole value)"]


def manifest_differences(published: Mapping[str, Any], replayed: Mapping[str, Any]) -> list[str]:
    """Key paths where two manifests differ, apart from :data:`RUN_FACTS` (stage names compared).

    >>> manifest_differences({"privacy": {"epsilon": 2.0}, "finished_at": "a"},
    ...                      {"privacy": {"epsilon": 1.0}, "finished_at": "b"})
    ['privacy.epsilon']
    """
    keys = sorted((set(published) | set(replayed)) - set(RUN_FACTS))
    out = value_differences({k: published.get(k) for k in keys}, {k: replayed.get(k) for k in keys})

    def names(m: Mapping[str, Any]) -> list[Any]:
        return [s.get("name") for s in m.get("stages") or [] if isinstance(s, dict)]

    if names(published) != names(replayed):
        out.append("stages (names)")
    return out


def same_value(a: Any, b: Any) -> bool:
    """Deep equality of checkpointed values (arrays, frames, Arrow tables, dataclasses, dicts).

    Used when two checkpoints' pickles differ in layout: NaN equals NaN, dtypes must match.

    >>> import numpy as np
    >>> same_value({"x": np.array([1, 2])}, {"x": np.array([1, 2])})
    True
    >>> same_value({"x": np.array([1, 2])}, {"x": np.array([1.0, 2.0])})
    False
    """
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        nan = a.dtype.kind in "fc"
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b, nan))
    if isinstance(a, pd.DataFrame | pd.Series | pd.Index):
        return bool(a.equals(b))
    if isinstance(a, pa.Table | pa.Array | pa.ChunkedArray | pa.RecordBatch):
        return bool(a.equals(b))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if is_dataclass(a):
        return all(same_value(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    slots = [s for c in type(a).__mro__ for s in getattr(c, "__slots__", ())]
    if hasattr(a, "__dict__") or slots:
        state_a = {**getattr(a, "__dict__", {}), **{s: getattr(a, s, None) for s in slots}}
        state_b = {**getattr(b, "__dict__", {}), **{s: getattr(b, s, None) for s in slots}}
        return same_value(state_a, state_b)
    return bool(a == b)
