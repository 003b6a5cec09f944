"""The stage registry: every stage of a release, its order and its charge/draw/resume behaviour.

The flow (``sds_release/flows/release.py``), the stage runner
(:meth:`sds_release.store.run.release_run.ReleaseRun.stage`), the manifest and the docs read stage
names and behaviour from here, and nowhere else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sds_core.errors import SdsInternalError
from sds_release.store.run import timing
from sds_release.store.run.memory import return_free_memory
from sds_release.store.workspace.home import utc_now

__all__ = [
    "AGGREGATE",
    "BINNING",
    "BUDGET",
    "COUNT",
    "EVALUATE",
    "FIT",
    "INGEST",
    "NORMALIZE",
    "PLAN",
    "PREPARE",
    "PUBLIC_STAGE_FIELDS",
    "PUBLISH",
    "SYNTHESIZE",
    "VALIDATE",
    "VALIDATE_OUTPUT",
    "StageSpec",
    "Timeline",
    "aggregate_stage",
    "public_stages",
    "release_stages",
    "spec",
    "stage_record",
]

BUDGET = "budget"
INGEST = "ingest"
VALIDATE = "validate"
BINNING = "binning"
PREPARE = "prepare"
COUNT = "count"
PLAN = "plan"
AGGREGATE = "aggregate"
NORMALIZE = "normalize"
SYNTHESIZE = "synthesize"
FIT = "fit"
VALIDATE_OUTPUT = "validate-output"
EVALUATE = "evaluate"
PUBLISH = "publish"


def aggregate_stage(k: int) -> str:
    """The name of the stage that aggregates combinations of length ``k`` (``aggregate-k``).

    >>> aggregate_stage(2)
    'aggregate-2'
    """
    if k < 1:
        raise SdsInternalError(f"combination length must be >= 1, got {k}")
    return f"{AGGREGATE}-{k}"


@dataclass(frozen=True, slots=True)
class StageSpec:
    """What one stage does to the budget, the randomness and the private workspace.

    Attributes:
        name: the stage name (ledger, manifest, checkpoints, Prefect task run).
        summary: one line for people (progress display, docs).
        charges: charged to the ledger before it draws anything (its planned charge, or for
            ``fit`` every charge of the chosen synthesizer).
        draws: draws noise or randomness from the release key.
        checkpoint: its result is saved privately (sha256-checked) and a resumed release loads
            it instead of running the stage again; noise is never drawn twice.
        sensitive: reads the sensitive table (its task never persists or caches results).
        public_timing: how long it takes depends only on DP outputs and public parameters, so
            its ``duration_s`` may be published (:func:`public_stages`). The rule, written
            once: a stage's time is public only when the stage reads neither the sensitive
            table nor anything computed from it but DP values. Every stage that reads the data
            (ingest, validate, binning, prepare, count, aggregate-k, fit, evaluate) takes a time
            that follows the data (aggregate-k's follows the number of distinct combinations);
            so do normalize, synthesize and validate-output, whose inputs carry the domain found
            in the data (values the DP threshold suppressed included), and publish, which writes
            the private custodian report from the evaluation. Only ``budget`` (the ledger and
            public parameters) and ``plan`` (the DP record count and the public column count)
            qualify.
    """

    name: str
    summary: str
    charges: bool = False
    draws: bool = False
    checkpoint: bool = False
    sensitive: bool = False
    public_timing: bool = False


_FIXED = {
    s.name: s
    for s in (
        StageSpec(
            BUDGET, "reserve the whole release's (ε, δ) before the data is read", public_timing=True
        ),
        StageSpec(INGEST, "read the sensitive input", sensitive=True),
        StageSpec(VALIDATE, "the Great Expectations gate on the input", sensitive=True),
        StageSpec(BINNING, "DP quantile bin edges of numeric columns", True, True, True, True),
        StageSpec(PREPARE, "SDS preprocessing into integer codes", sensitive=True),
        StageSpec(COUNT, "the DP record count", True, True, True, True),
        StageSpec(
            PLAN,
            "the SDS plan: R, split and synthesis from the DP record count (no spend)",
            checkpoint=True,
            public_timing=True,
        ),
        StageSpec(NORMALIZE, "rounding, missing parents, child <= parent", checkpoint=True),
        StageSpec(SYNTHESIZE, "aggregate-seeded synthesis", draws=True, checkpoint=True),
        StageSpec(FIT, "fit a registry synthesizer and sample", True, True, True, True),
        StageSpec(VALIDATE_OUTPUT, "the synthetic records against the declared schema"),
        StageSpec(
            EVALUATE, "utility metrics (from the sensitive data)", checkpoint=True, sensitive=True
        ),
        StageSpec(PUBLISH, "write the artifacts and the complete manifest"),
    )
}


def spec(name: str) -> StageSpec:
    """The registry entry of a stage name (``aggregate-k`` included).

    >>> spec("aggregate-3").charges, spec("normalize").charges
    (True, False)
    """
    if name in _FIXED:
        return _FIXED[name]
    prefix, _, k = name.rpartition("-")
    if prefix == AGGREGATE and k.isdigit() and int(k) >= 1:
        return StageSpec(
            name, f"DP counts of the combinations of length {k}", True, True, True, True
        )
    raise SdsInternalError(f"no stage named {name!r} in the registry")


def release_stages(
    reporting_length: int, *, aggregate_seeded: bool = True, dp_binning: bool = False
) -> tuple[str, ...]:
    """The stages of one release, in order (``binning`` only with DP quantile bins).

    >>> release_stages(2)[:6]
    ('budget', 'ingest', 'validate', 'prepare', 'count', 'plan')
    >>> release_stages(3, aggregate_seeded=False)[4]
    'fit'
    >>> release_stages(2, dp_binning=True)[3]
    'binning'
    """
    middle = (
        (
            COUNT,
            PLAN,
            *(aggregate_stage(k) for k in range(1, reporting_length + 1)),
            NORMALIZE,
            SYNTHESIZE,
        )
        if aggregate_seeded
        else (FIT,)
    )
    binning = (BINNING,) if dp_binning else ()
    return (
        BUDGET,
        INGEST,
        VALIDATE,
        *binning,
        PREPARE,
        *middle,
        VALIDATE_OUTPUT,
        EVALUATE,
        PUBLISH,
    )


def stage_record(name: str, started: str, t0: float, **extra: Any) -> dict[str, Any]:
    """The manifest entry of a finished stage: name, status, ISO times (ms), ``duration_s``.

    ``started`` is the :func:`sds_release.store.workspace.home.utc_now` text taken when the stage
    began and ``t0`` the ``time.perf_counter()`` reading taken with it; ``extra`` adds fields (e.g.
    ``artifacts``).
    """
    spec(name)  # a name the registry knows
    return {
        "name": name,
        "status": "complete",
        "started": started,
        "finished": utc_now(),
        "duration_s": round(time.perf_counter() - t0, 3),
        **extra,
    }


PUBLIC_STAGE_FIELDS = ("name", "status", "artifacts")
"""What the public manifest keeps of every stage record (plus ``duration_s`` of a stage whose
time is public): never the start and finish times, whose differences would give the time of
the stages between them."""


def public_stages(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manifest's ``stages``: each record's name, status and artifacts, and ``duration_s``
    only where :attr:`StageSpec.public_timing` says the stage's time is public.

    The full records (start, finish, every duration) stay in the private workspace
    (``private/<release-id>/timeline.json``) and the custodian report.

    >>> public_stages([
    ...     {"name": "ingest", "status": "complete", "started": "t0", "duration_s": 1.5},
    ...     {"name": "plan", "status": "complete", "started": "t1", "duration_s": 0.01},
    ... ])
    [{'name': 'ingest', 'status': 'complete'}, {'name': 'plan', 'status': 'complete', 'duration_s': 0.01}]
    """  # noqa: E501
    out = []
    for record in records:
        kept = {k: record[k] for k in PUBLIC_STAGE_FIELDS if k in record}
        if spec(str(record["name"])).public_timing and "duration_s" in record:
            kept["duration_s"] = record["duration_s"]
        out.append(kept)
    return out


class Timeline:
    """The finished stages of one run, in order: name, start and finish times, ``duration_s``.

    The one record of stage timings (the manifest's ``stages``); a stage is recorded only when
    its body finishes. ``on_done`` (e.g. the run logger) is called with each finished record.
    """

    def __init__(self, on_done: Callable[[dict[str, Any]], None] | None = None) -> None:
        """An empty timeline."""
        self.done: list[dict[str, Any]] = []
        self._on_done = on_done

    @contextmanager
    def run(self, name: str) -> Iterator[None]:
        """Time the stage ``name`` (a registry name) while its body runs."""
        spec(name)  # a name the registry knows
        started, t0 = utc_now(), time.perf_counter()
        with timing.span(f"stage:{name}"):  # bench/bench_release.py only
            yield
        self.done.append(stage_record(name, started, t0))
        return_free_memory()  # the stage's freed temporaries, not kept for the next stage
        if self._on_done is not None:
            self._on_done(self.done[-1])
