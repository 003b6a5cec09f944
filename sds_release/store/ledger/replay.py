"""The ledger as a replay sees it: one release's recorded reservation and charges, read once.

``sds audit RELEASE_ID --replay`` reruns the release's stages on a :class:`ReplayLedger` instead
of the real ledger (``ReleaseRun.replay``): charging only checks that the release recorded that
charge, closing does nothing, and nothing is ever written, so a replay spends nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sds_core.errors import SdsInternalError
from sds_release.store.ledger.values import CancelResult, ChargeRow, PlannedCharge, Reservation

__all__ = ["ReplayLedger"]


@dataclass(slots=True)
class ReplayLedger:
    """The recorded reservation and charges of one release; every stage charge is only checked.

    Attributes:
        reservation: the release's reservation as the ledger holds it.
        recorded: the release's charge rows, in ledger order.
        replayed: the stages the replay asked to charge that the release did charge.
        unrecorded: the stages the replay asked to charge that the release never charged (a
            difference: the replay's parameters or code plan another spend).
    """

    reservation: Reservation
    recorded: tuple[ChargeRow, ...]
    replayed: list[str] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)

    def charge(
        self,
        release_id: str,
        stage: str,
        *,
        flow_run_id: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Note a stage charge: found among the recorded ones or not; nothing is written."""
        self._same_release(release_id)
        rows = {r.stage for r in self.recorded}
        (self.replayed if stage in rows else self.unrecorded).append(stage)

    def revise_plan(
        self, release_id: str, planned: Sequence[PlannedCharge], *, flow_run_id: str | None = None
    ) -> Reservation:
        """Check a plan revision: the release recorded this plan (else it counts as a
        difference: the replay plans another spend); nothing is written."""
        self._same_release(release_id)
        if tuple(planned) != self.reservation.planned:
            self.unrecorded.append("plan")
        return self.reservation

    def charges(self, dataset: str | None = None, release_id: str | None = None) -> list[ChargeRow]:
        """The recorded charge rows (what the release's manifest lists as its privacy spend)."""
        if release_id is not None:
            self._same_release(release_id)
        return [r for r in self.recorded if dataset in (None, r.dataset)]

    def complete(self, release_id: str) -> None:
        """Nothing to close: the release's reservation was closed when it was published."""
        self._same_release(release_id)

    def cancel(self, release_id: str) -> CancelResult:
        """A replay never cancels a reservation (it is a bug to get here)."""
        raise SdsInternalError(f"a replay of release {release_id!r} tried to cancel it")

    def _same_release(self, release_id: str) -> None:
        if release_id != self.reservation.release_id:
            raise SdsInternalError(
                f"the replay of release {self.reservation.release_id!r} was asked about "
                f"release {release_id!r}"
            )
