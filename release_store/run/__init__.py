"""One running release: ReleaseRun, the stage registry, the private workdir, logs, progress.

- ``release_run``: :class:`ReleaseRun`, :class:`SensitiveTable`, the reservation;
- ``results``: what the SDS stages hand each other (:class:`PlannedRelease`,
  :class:`LengthResult`, :class:`LengthNoise`);
- ``claims``: what a release may claim: where its δ goes, the seeded-release warning;
- ``stages``: the stage registry: order, charge/draw/resume behaviour, timeline;
- ``workdir``: the release key, checkpoints, private state and manifest writes;
- ``stage_log``: one DP-safe log line per stage;
- ``progress``: progress hooks and the CLI's display;
- ``failure``: a full disk during a release: recognising it and what the user is told;
- ``faults``: the test-only fault points (die or pause at a named moment of a release);
- ``timing``: the benchmark-only timing marks (``SDS_TIMING_FILE``: bench/bench_release.py).

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "AGGREGATE": "release_store.run.stages",
    "BINNING": "release_store.run.stages",
    "BUDGET": "release_store.run.stages",
    "COUNT": "release_store.run.stages",
    "EVALUATE": "release_store.run.stages",
    "FIT": "release_store.run.stages",
    "INGEST": "release_store.run.stages",
    "KILL_ENV": "release_store.run.faults",
    "PAUSE_ENV": "release_store.run.faults",
    "NORMALIZE": "release_store.run.stages",
    "PREPARE": "release_store.run.stages",
    "PUBLISH": "release_store.run.stages",
    "LengthNoise": "release_store.run.results",
    "LengthResult": "release_store.run.results",
    "PlannedRelease": "release_store.run.results",
    "ProtectedCount": "release_store.run.release_run",
    "ReleaseDirs": "release_store.run.workdir",
    "ReleaseRun": "release_store.run.release_run",
    "Reporter": "release_store.run.progress",
    "RichProgress": "release_store.run.progress",
    "SEEDED_WARNING": "release_store.run.claims",
    "SYNTHESIZE": "release_store.run.stages",
    "TIMING_ENV": "release_store.run.timing",
    "SensitiveTable": "release_store.run.release_run",
    "StageLogger": "release_store.run.stage_log",
    "StageSpec": "release_store.run.stages",
    "Timeline": "release_store.run.stages",
    "VALIDATE": "release_store.run.stages",
    "VALIDATE_OUTPUT": "release_store.run.stages",
    "advance": "release_store.run.progress",
    "aggregate_stage": "release_store.run.stages",
    "also_reporting": "release_store.run.progress",
    "binning_spend": "release_store.run.release_run",
    "by_length_text": "release_store.run.stage_log",
    "charged_text": "release_store.run.stage_log",
    "delta_detail": "release_store.run.claims",
    "disk_full": "release_store.run.failure",
    "disk_full_error": "release_store.run.failure",
    "fault_point": "release_store.run.faults",
    "finished": "release_store.run.stage_log",
    "gate_text": "release_store.run.stage_log",
    "mark": "release_store.run.timing",
    "noise_scales": "release_store.run.release_run",
    "not_private_reason": "release_store.run.claims",
    "now": "release_store.run.workdir",
    "planned_charges": "release_store.run.release_run",
    "privacy_claims": "release_store.run.claims",
    "registry_synthesizer": "release_store.run.release_run",
    "release_stages": "release_store.run.stages",
    "reporting": "release_store.run.progress",
    "reserve": "release_store.run.release_run",
    "spec": "release_store.run.stages",
    "span": "release_store.run.timing",
    "stage": "release_store.run.progress",
    "stage_done": "release_store.run.stage_log",
    "stage_record": "release_store.run.stages",
    "warning": "release_store.run.progress",
    "warning_line": "release_store.run.progress",
}

__all__ = [
    "AGGREGATE",
    "BINNING",
    "BUDGET",
    "COUNT",
    "EVALUATE",
    "FIT",
    "INGEST",
    "KILL_ENV",
    "NORMALIZE",
    "PAUSE_ENV",
    "PREPARE",
    "PUBLISH",
    "SEEDED_WARNING",
    "SYNTHESIZE",
    "TIMING_ENV",
    "VALIDATE",
    "VALIDATE_OUTPUT",
    "LengthNoise",
    "LengthResult",
    "PlannedRelease",
    "ProtectedCount",
    "ReleaseDirs",
    "ReleaseRun",
    "Reporter",
    "RichProgress",
    "SensitiveTable",
    "StageLogger",
    "StageSpec",
    "Timeline",
    "advance",
    "aggregate_stage",
    "also_reporting",
    "binning_spend",
    "by_length_text",
    "charged_text",
    "delta_detail",
    "disk_full",
    "disk_full_error",
    "fault_point",
    "finished",
    "gate_text",
    "mark",
    "noise_scales",
    "not_private_reason",
    "now",
    "planned_charges",
    "privacy_claims",
    "registry_synthesizer",
    "release_stages",
    "reporting",
    "reserve",
    "span",
    "spec",
    "stage",
    "stage_done",
    "stage_record",
    "warning",
    "warning_line",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from release_store.run.claims import (
        SEEDED_WARNING,
        delta_detail,
        not_private_reason,
        privacy_claims,
    )
    from release_store.run.failure import disk_full, disk_full_error
    from release_store.run.faults import KILL_ENV, PAUSE_ENV, fault_point
    from release_store.run.progress import (
        Reporter,
        RichProgress,
        advance,
        also_reporting,
        reporting,
        stage,
        warning,
        warning_line,
    )
    from release_store.run.release_run import (
        ProtectedCount,
        ReleaseRun,
        SensitiveTable,
        binning_spend,
        noise_scales,
        planned_charges,
        registry_synthesizer,
        reserve,
    )
    from release_store.run.results import LengthNoise, LengthResult, PlannedRelease
    from release_store.run.stage_log import (
        StageLogger,
        by_length_text,
        charged_text,
        finished,
        gate_text,
        stage_done,
    )
    from release_store.run.stages import (
        AGGREGATE,
        BINNING,
        BUDGET,
        COUNT,
        EVALUATE,
        FIT,
        INGEST,
        NORMALIZE,
        PREPARE,
        PUBLISH,
        SYNTHESIZE,
        VALIDATE,
        VALIDATE_OUTPUT,
        StageSpec,
        Timeline,
        aggregate_stage,
        release_stages,
        spec,
        stage_record,
    )
    from release_store.run.timing import TIMING_ENV, mark, span
    from release_store.run.workdir import ReleaseDirs, now
