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
    "AGGREGATE": "sds_release.store.run.stages",
    "BINNING": "sds_release.store.run.stages",
    "BUDGET": "sds_release.store.run.stages",
    "COUNT": "sds_release.store.run.stages",
    "EVALUATE": "sds_release.store.run.stages",
    "FIT": "sds_release.store.run.stages",
    "INGEST": "sds_release.store.run.stages",
    "KILL_ENV": "sds_release.store.run.faults",
    "PAUSE_ENV": "sds_release.store.run.faults",
    "NORMALIZE": "sds_release.store.run.stages",
    "PREPARE": "sds_release.store.run.stages",
    "PUBLISH": "sds_release.store.run.stages",
    "LengthNoise": "sds_release.store.run.results",
    "LengthResult": "sds_release.store.run.results",
    "PlannedRelease": "sds_release.store.run.results",
    "ProtectedCount": "sds_release.store.run.release_run",
    "ReleaseDirs": "sds_release.store.run.workdir",
    "ReleaseRun": "sds_release.store.run.release_run",
    "Reporter": "sds_release.store.run.progress",
    "RichProgress": "sds_release.store.run.progress",
    "SEEDED_WARNING": "sds_release.store.run.claims",
    "SYNTHESIZE": "sds_release.store.run.stages",
    "TIMING_ENV": "sds_release.store.run.timing",
    "SensitiveTable": "sds_release.store.run.release_run",
    "StageLogger": "sds_release.store.run.stage_log",
    "StageSpec": "sds_release.store.run.stages",
    "Timeline": "sds_release.store.run.stages",
    "VALIDATE": "sds_release.store.run.stages",
    "VALIDATE_OUTPUT": "sds_release.store.run.stages",
    "advance": "sds_release.store.run.progress",
    "aggregate_stage": "sds_release.store.run.stages",
    "also_reporting": "sds_release.store.run.progress",
    "binning_spend": "sds_release.store.run.release_run",
    "by_length_text": "sds_release.store.run.stage_log",
    "charged_text": "sds_release.store.run.stage_log",
    "delta_detail": "sds_release.store.run.claims",
    "disk_full": "sds_release.store.run.failure",
    "disk_full_error": "sds_release.store.run.failure",
    "fault_point": "sds_release.store.run.faults",
    "finished": "sds_release.store.run.stage_log",
    "gate_text": "sds_release.store.run.stage_log",
    "mark": "sds_release.store.run.timing",
    "noise_scales": "sds_release.store.run.release_run",
    "not_private_reason": "sds_release.store.run.claims",
    "now": "sds_release.store.run.workdir",
    "planned_charges": "sds_release.store.run.release_run",
    "privacy_claims": "sds_release.store.run.claims",
    "registry_synthesizer": "sds_release.store.run.release_run",
    "release_stages": "sds_release.store.run.stages",
    "reporting": "sds_release.store.run.progress",
    "reserve": "sds_release.store.run.release_run",
    "spec": "sds_release.store.run.stages",
    "span": "sds_release.store.run.timing",
    "stage": "sds_release.store.run.progress",
    "stage_done": "sds_release.store.run.stage_log",
    "stage_record": "sds_release.store.run.stages",
    "warning": "sds_release.store.run.progress",
    "warning_line": "sds_release.store.run.progress",
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
    from sds_release.store.run.claims import (
        SEEDED_WARNING,
        delta_detail,
        not_private_reason,
        privacy_claims,
    )
    from sds_release.store.run.failure import disk_full, disk_full_error
    from sds_release.store.run.faults import KILL_ENV, PAUSE_ENV, fault_point
    from sds_release.store.run.progress import (
        Reporter,
        RichProgress,
        advance,
        also_reporting,
        reporting,
        stage,
        warning,
        warning_line,
    )
    from sds_release.store.run.release_run import (
        ProtectedCount,
        ReleaseRun,
        SensitiveTable,
        binning_spend,
        noise_scales,
        planned_charges,
        registry_synthesizer,
        reserve,
    )
    from sds_release.store.run.results import LengthNoise, LengthResult, PlannedRelease
    from sds_release.store.run.stage_log import (
        StageLogger,
        by_length_text,
        charged_text,
        finished,
        gate_text,
        stage_done,
    )
    from sds_release.store.run.stages import (
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
    from sds_release.store.run.timing import TIMING_ENV, mark, span
    from sds_release.store.run.workdir import ReleaseDirs, now
