"""What each stage tells the run's log: one DP-safe INFO line per stage (no Prefect here).

The tasks pass in the logger (Prefect's run logger, which sends to the server, where UI users read
it) and only public or DP facts: names, counts of DP combinations or synthetic records, the DP
record count, ε and δ charged. Never a data value, an exact count, the true record count or
anything else computed from the data outside a DP mechanism (the "0" cells warning goes to the
custodian's terminal and report; stage times only where ``StageSpec.public_timing`` allows).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from sds_release.store.run.release_run import ReleaseRun

__all__ = ["StageLogger", "by_length_text", "charged_text", "finished", "gate_text", "stage_done"]


class StageLogger(Protocol):
    """The part of a ``logging.Logger`` (or Prefect run logger) the stages use."""

    def info(self, msg: str, *args: Any) -> None:
        """Log at INFO."""


def finished(run: ReleaseRun, stage: str) -> bool:
    """Whether ``stage`` already finished (its checkpoint will be loaded, nothing redrawn)."""
    return stage in run.dirs.state().get("stages", {})


def charged_text(run: ReleaseRun, stages: Iterable[str]) -> str:
    """What the ledger charged this release for ``stages`` (public accounting)."""
    wanted = set(stages)
    rows = [c for c in run.ledger().charges(release_id=run.release_id) if c.stage in wanted]
    if not rows:
        return "no budget charged"
    parts = [f"ε={c.epsilon:.6g} δ={c.delta:.3g} ({c.mechanism})" for c in rows]
    return "charged " + ", ".join(parts)


def gate_text(summary: list[dict[str, Any]], what: str) -> str:
    """The schema gate's outcome from its public summary (expectation kinds and columns).

    >>> gate_text([{"success": True}, {"success": True}], "input")
    'the input passed all 2 expectations of the declared schema'
    >>> gate_text([], "output")
    'no schema declared: the output gate has nothing to check'
    """
    if not summary:
        return f"no schema declared: the {what} gate has nothing to check"
    passed = sum(1 for s in summary if s.get("success"))
    return f"the {what} passed {'all ' if passed == len(summary) else ''}{passed} expectations" + (
        " of the declared schema" if passed == len(summary) else f" of {len(summary)}"
    )


def by_length_text(counts: Mapping[int, int]) -> str:
    """``1: 12, 2: 40`` from DP combination counts by length.

    >>> by_length_text({2: 40, 1: 12})
    'length 1: 12, length 2: 40'
    """
    return ", ".join(f"length {k}: {n}" for k, n in sorted(counts.items()))


def stage_done(
    logger: StageLogger,
    run: ReleaseRun,
    stage: str,
    did: str,
    *,
    resumed: bool = False,
    charged: Iterable[str] | None = None,
) -> None:
    """Log one line: the stage, what it did (DP-safe text) and what it was charged.

    ``charged`` names the ledger stages to report (default: the stage itself); a resumed stage
    says that it loaded its checkpoint and drew no new noise.
    """
    spend = charged_text(run, [stage] if charged is None else charged)
    if resumed:
        logger.info("%s: resumed from its checkpoint, no new noise (%s); %s", stage, spend, did)
    else:
        logger.info("%s: %s; %s", stage, did, spend)
