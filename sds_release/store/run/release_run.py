"""One running release: its parameters, budget reservation, stage runner and failure record.

:class:`ReleaseRun` is the one object every stage task receives: where the release lives, what
it may spend and how it was asked for. :meth:`ReleaseRun.stage` is the resume idiom, written
once: a finished stage loads its checkpoint; otherwise it is charged (when the stage registry
says so), computed (drawing noise from the release key) and checkpointed. The sensitive table
travels only as a :class:`SensitiveTable` handle, which refuses to be pickled or printed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError, SdsInternalError
from sds_release.store.config.core_objects import (
    binning_epsilon,
    dp_binned_columns,
    dp_params,
    synthesis_epsilon,
    synthesizer_domains,
)
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.ledger.backends import default_ledger_url, resolve_ledger_url, split_password
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.replay import ReplayLedger
from sds_release.store.ledger.units import privacy_unit
from sds_release.store.run import progress, stages
from sds_release.store.run.failure import (
    NothingToRelease,
    disk_full,
    disk_full_error,
    unless_disk_full,
)
from sds_release.store.run.faults import KILL_ENV, fault_point
from sds_release.store.run.results import LengthNoise
from sds_release.store.run.workdir import DamagedCheckpoint, ReleaseDirs, atomic_write_json, now
from sds_release.store.workspace.home import new_release_id, resolve_home
from sds_release.store.workspace.manifest import Manifest, discard_incomplete
from sds_release.store.workspace.subjects import SubjectRecord

__all__ = [
    "KILL_ENV",
    "ProtectedCount",
    "ReleaseRun",
    "SensitiveTable",
    "binning_spend",
    "noise_scales",
    "planned_charges",
    "registry_synthesizer",
    "reserve",
]

T = TypeVar("T")


class SensitiveTable(Generic[T]):
    """A handle on the sensitive table (raw or prepared): held by the flow run only.

    It cannot be pickled (so no result store, cache or process pool can persist it), and its
    ``repr`` shows only the type, so it cannot reach a log by accident. ``.value`` is the table.
    """

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        """Wrap ``value`` (an Arrow table or a ``PreparedTable``)."""
        self.value = value

    def __repr__(self) -> str:
        """The type only, never the content."""
        return f"SensitiveTable[{type(self.value).__name__}](<withheld>)"

    def __reduce__(self) -> Any:
        """Refuse pickling: the sensitive table is never persisted."""
        raise SdsInternalError("the sensitive table must never be pickled, persisted or cached")


@dataclass(frozen=True, slots=True)
class ReleaseRun:
    """One release being run: its parameters, id, home and the flow run that runs it.

    A replay (``sds audit RELEASE_ID --replay``, :mod:`sds_release.store.audit.replay`) sets
    ``replay``: ``home`` is then a throwaway directory holding a copy of the release key, and the
    ledger is the release's recorded charges, read-only, so running the stages again spends nothing;
    ``source_home`` is the release's own home (its subject record is read, never written).
    """

    params: ReleaseParams
    release_id: str
    home: str
    flow_run_id: str | None = None
    replay: ReplayLedger | None = None
    source_home: str | None = None

    def with_params(self, params: ReleaseParams) -> ReleaseRun:
        """The same release running with ``params``: the SDS plan's (``plan`` stage), which
        only sets what the configuration left empty (R, the split, the synthesis)."""
        return replace(self, params=params)

    @property
    def dataset(self) -> str:
        """The dataset whose budget the release spends."""
        if self.params.dataset is None:  # ReleaseParams requires it; a bug if it is missing
            raise SdsInternalError("a release run without a dataset id")
        return self.params.dataset

    @property
    def epsilon(self) -> float:
        """ε of the whole release."""
        return self.params.epsilon

    @property
    def delta(self) -> float:
        """δ of the whole release (fixed before the data is read)."""
        return self.params.resolved_delta()

    @property
    def dirs(self) -> ReleaseDirs:
        """The release's directories, key, checkpoints and manifest."""
        return ReleaseDirs(Path(self.home), self.dataset, self.release_id, self.params.ledger)

    def ledger(self) -> Ledger | ReplayLedger:
        """The privacy-budget ledger: ``params.ledger``, else $SDS_LEDGER_URL, else the home's
        (a replay: the recorded charges, read-only). A PostgreSQL server that does not answer
        is retried for the busy timeout (a restart), as every ledger write is."""
        if self.replay is not None:
            return self.replay
        return Ledger.open(self.home, self.params.ledger, wait=True)  # it answered at reserve

    def subject_record(self) -> SubjectRecord:
        """Which period each subject of the dataset counts in (a periodic release with a
        subject id); a replay reads its release's own home's record.

        Releases of different periods run one after another: the record's assignments then
        happen in the order the releases ran (public), never in an order set by how long each
        took to read its input.

        Raises:
            SdsInputError: a release of another period of the dataset is still open; or the
                home has no record of the dataset's subjects while other periods of it have
                spent (the record was lost, or they were released from another home): counting
                their subjects again would break the per-subject guarantee.
        """
        record = SubjectRecord(self.source_home or self.home, self.dataset)
        if self.replay is not None:
            return record
        ledger = self.ledger()
        if not isinstance(ledger, Ledger):  # a replay's recorded charges (handled above)
            raise SdsInternalError("a release's ledger is not a Ledger")
        others = [
            r
            for r in ledger.reservations(self.dataset)
            if r.period not in (None, self.params.period) and r.release_id != self.release_id
        ]
        running = sorted(
            f"{r.release_id} (period {r.period})" for r in others if r.status == "open"
        )
        if running:
            raise SdsInputError(
                f"release(s) {', '.join(running)} of dataset {self.dataset!r} are still open: "
                "releases of different periods of a dataset with a subject id run one after "
                "another, so that each subject counts in the period released first. Finish "
                "them with `sds resume RELEASE_ID` or abandon them with `sds cancel "
                "RELEASE_ID`, then release this period again. Nothing was charged."
            )
        if record.exists():
            return record
        spent = [
            str(r.period)
            for r in others
            if (ledger.spent(r.release_id) or (0.0, 0.0)) != (0.0, 0.0)
        ]
        if spent:
            raise SdsInputError(
                f"dataset {self.dataset!r} has released period(s) {sorted(set(spent))} with "
                f"spend, but this home has no record of which period their subjects count in "
                f"({record.dir}): it was removed, or those periods were released from another "
                "home. Restore that folder from a backup of the home (or release from the home "
                "that holds it); without it, their subjects would count again in this period. "
                "Nothing was charged."
            )
        return record

    def randomness(self) -> ReleaseRandomness:
        """The release key (stored in the private workspace on first use)."""
        return self.dirs.randomness(self.params.seed)

    def stage(
        self,
        name: str,
        compute: Callable[[], T],
        *,
        charges: Iterable[str] | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> T:
        """Run stage ``name`` once per release, as the stage registry says.

        A finished stage returns its checkpoint. Otherwise the stage is charged first (its own
        planned charge, with ``detail`` recorded on it, or the ledger stages in ``charges``),
        then ``compute`` runs (drawing from the release key), then its result is checkpointed;
        a crash in between leaves the charge in place and a resumed stage redraws the same noise
        from the same key. A checkpoint damaged on disk is computed again the same way, and
        must give the bytes recorded when the stage first finished (else resume refuses).
        """
        entry = stages.spec(name)
        if entry.checkpoint:
            try:
                done = self.dirs.load_checkpoint(name)
            except DamagedCheckpoint as e:  # computed again below; must give the same bytes
                done = None
                progress.warning(
                    f"the checkpoint {e.path} of stage {name!r} is damaged (its sha256 differs "
                    "from the one recorded); computing the stage again from the release key, "
                    "which must give the same bytes (nothing is charged again)"
                )
            if done is not None:
                return done  # type: ignore[no-any-return]
        if entry.charges:
            fault_point(f"charge:{name}", self.dirs.private_dir)
            ledger = self.ledger()
            for charged in [name] if charges is None else list(charges):
                own = detail if charged == name else None
                ledger.charge(self.release_id, charged, flow_run_id=self.flow_run_id, detail=own)
        result = compute()
        fault_point(name, self.dirs.private_dir)  # test-only: SDS_TEST_KILL_AT/PAUSE_AT
        if entry.checkpoint:
            self.dirs.save_checkpoint(name, result)
        return result

    def mark_failed(self, error: BaseException, stages_done: list[dict[str, Any]]) -> BaseException:
        """Record a failure: manifest ``failed`` (redacted reason), full reason privately.

        When nothing was charged the reservation is cancelled (the whole budget goes back); so
        is one whose DP counts left nothing to release (:class:`NothingToRelease`: what was drawn
        stays charged, and a resume would end the same way); otherwise, or when the ledger
        cannot be read (the ledger is what failed), it stays open so ``sds resume`` can finish
        the release without new spend.
        Returns the error to tell the user: ``error``, or when the disk is full (see
        :mod:`sds_release.store.run.failure`) one that says so and how to resume. On a full disk,
        the published files go first (deleting them frees space) and each write of the record
        the disk refuses is skipped; nothing is left looking published either way. A release
        whose manifest is already complete (an error after it was published, e.g. the Prefect
        server lost) is left complete: only the private failure record is written.
        """
        dirs = self.dirs

        def record_failure() -> None:
            with unless_disk_full():
                atomic_write_json(
                    dirs.private_dir / "failure.json",
                    {"at": now(), "type": type(error).__name__, "message": str(error)},
                    private=True,
                )

        published = dirs.manifest()
        if published is not None and published.get("status") == "complete":
            record_failure()
            return error  # published and its reservation closed: a later error must not undo it
        ledger: Ledger | ReplayLedger | None = None
        try:
            ledger = self.ledger()
            charged = bool(ledger.charges(release_id=self.release_id))
        except Exception:  # the ledger is what failed (unreachable): keep the reservation open
            ledger, charged = None, True
        reason = f"{type(error).__name__} (details in the private workspace)"
        with unless_disk_full():
            if dirs.manifest() is None:  # a manifest to mark failed (reserve writes one)
                dirs.write_manifest(
                    {"release_id": self.release_id, "dataset": self.dataset, "status": "failed"}
                )
        with unless_disk_full():
            discard_incomplete(dirs.release_dir, reason=reason)
        record_failure()
        resumable = True  # the reservation stays open: charged, unreadable, or a full disk
        if (not charged or isinstance(error, NothingToRelease)) and ledger is not None:
            with unless_disk_full():
                ledger.cancel(self.release_id)
                resumable = False
        with unless_disk_full():
            dirs.write_timeline(stages_done, failed_at=now())
            manifest = dirs.manifest() or {}
            manifest.update({"stages": stages.public_stages(stages_done), "resumable": resumable})
            dirs.write_manifest(manifest)
        full = disk_full(error)
        if full is None:
            return error
        return disk_full_error(full, self.release_id, Path(self.home), resumable=resumable)


def registry_synthesizer(params: ReleaseParams) -> Any:
    """The registry synthesizer of ``params``, with options from the declared schema."""
    from sds_core.synthesizers import create, option_names

    names = set(option_names(params.synthesizer))
    if "max_model_bytes" in names:  # mst: columns come from the data's domain
        return create(params.synthesizer, max_model_bytes=params.max_model_bytes)
    if "declared" in names and params.table_schema is not None:
        return create(params.synthesizer, declared=synthesizer_domains(params))
    if "columns" not in names:
        return create(params.synthesizer)
    columns = list(params.use_columns) or (
        [c.name for c in params.table_schema.columns] if params.table_schema else []
    )
    if not columns:
        raise SdsInputError(
            f"synthesizer {params.synthesizer!r} splits its budget over the columns, which must "
            "be known before the data is read: declare a [schema] or pass --use-columns a,b,c"
        )
    if "marginal_columns" in names:  # histogram-nway: one joint histogram over all columns
        return create(params.synthesizer, columns=tuple(columns), marginal_columns=tuple(columns))
    return create(params.synthesizer, columns=tuple(columns))


def binning_spend(params: ReleaseParams) -> Any | None:
    """The ``binning`` stage's charge when the schema asks for DP quantile bins, else None.

    ε_b = binning_epsilon_proportion·ε, split equally over the DP-binned columns (each record is
    in every column: sequential composition); pure ε-DP, ρ = Σ (q − 1)·(ε_i)²/8 (bounded range).
    """
    from sds_core.dp.accounting import StageSpend
    from sds_core.dp.quantiles import quantile_rho

    cols = dp_binned_columns(params)
    if not cols:
        return None
    eps_b = binning_epsilon(params)
    per_col = eps_b / len(cols)
    rho = 0.0
    for c in cols:
        q = c.bins.dp_quantiles if c.bins is not None else None
        if q is not None:
            rho += quantile_rho(per_col, q)
    return StageSpend(
        stages.BINNING, "exponential-mechanism quantiles (bounded range)", eps_b, 0.0, rho
    )


def planned_charges(params: ReleaseParams) -> list[Any]:
    """The ledger plan of a release (one ``StageSpend`` per charged stage), without the data."""
    from sds_core.marginals.engine import plan_release

    binning = binning_spend(params)
    first = [binning] if binning is not None else []
    if not params.aggregate_seeded:
        synth = registry_synthesizer(params)
        return first + list(synth.budget(synthesis_epsilon(params), params.resolved_delta()))
    return first + list(plan_release(dp_params(params), 1).stage_spends())  # δ explicit


def ledger_identity(run: ReleaseRun) -> str | None:
    """The ledger a release is reserved in, as kept in its private parameters: None for the
    home's own SQLite file (which moves with the home), else the URL without its password."""
    url = resolve_ledger_url(run.home, run.params.ledger)
    return None if url == default_ledger_url(run.home) else split_password(url)[0]


REGISTRY_NOISE = (
    "This release was made by a registry synthesizer, not by the SDS aggregate stages: its "
    "noise is described with the synthesizer in docs/synthesizers.md, and the published "
    "aggregates are exact counts of the synthetic records (post-processing of DP output)."
)
"""``privacy.noise.how_to_read`` of a release made by a registry synthesizer."""


def noise_scales(params: ReleaseParams, lengths: Mapping[int, LengthNoise]) -> dict[str, Any]:
    """The manifest's ``privacy.noise``: the noise of the record count and of each length k.

    ``lengths`` maps k to its ``aggregate-k`` result's noise (``allowed_sensitivity`` and
    ``threshold``: DP values); σ_k and the Laplace scale come from the budget plan, which
    needs no data. A registry synthesizer (no SDS lengths) has ``by_length = []`` and no record
    count. See :func:`sds_core.marginals.privacy_report.noise_description`.
    """
    from sds_core.marginals.engine import plan_release
    from sds_core.marginals.privacy_report import noise_description

    if not params.aggregate_seeded:
        return {"record_count": None, "by_length": [], "how_to_read": REGISTRY_NOISE}
    ks = sorted(lengths)
    return noise_description(
        plan_release(dp_params(params), 1),  # δ explicit: the count does not enter the plan
        [int(lengths[k].allowed_sensitivity) for k in ks],
        [float(lengths[k].threshold) for k in ks],
    )


def reserve(params: ReleaseParams, flow_run_id: str | None = None) -> ReleaseRun:
    """Reserve the whole release's (ε, δ) before any data is read; refuse if it does not fit.

    Also refuses a release id that is complete or was closed, and a resumed release whose
    parameters changed; creates the workspace, the release key, the input commitment key and
    the running manifest.
    """
    home = resolve_home(params.home)
    release_id = params.release_id or new_release_id(params.dataset)
    run = ReleaseRun(params, release_id, str(home), flow_run_id)
    dirs = run.dirs
    manifest = dirs.manifest()
    if manifest is not None and manifest.get("status") == "complete":
        raise SdsInputError(
            f"release id {release_id!r} already exists and is complete ({dirs.release_dir}); "
            "choose another --release-id or leave it out to get a new one"
        )
    saved = dirs.private_dir / "params.json"
    kept = params.private_dict() | {"release_id": release_id, "ledger": ledger_identity(run)}
    before = json.loads(saved.read_text()) if saved.is_file() else None
    if before is not None and before.get("ledger") != kept["ledger"]:  # before opening it
        was, now_ = before.get("ledger") or "of its home", kept["ledger"] or "of the home"
        raise SdsInputError(
            f"release {release_id!r} was reserved in the ledger {was}, not in the ledger "
            f"{now_}; resume it against the same ledger (--ledger URL or SDS_LEDGER_URL)"
        )
    ledger = Ledger.open(run.home, params.ledger)  # a reservation is never a replay
    earlier = ledger.reservation(release_id)
    # completed in the ledger but never published (killed between the two): resumable, it
    # finishes from its checkpoints without any new charge
    unpublished = earlier is not None and earlier.status == "completed" and before is not None
    same = before is not None and {k: v for k, v in before.items() if k != "home"} == {
        k: v  # a parameter added since the release started counts when it is set
        for k, v in kept.items()
        if k != "home" and (k in before or v is not None)
    }
    if earlier is not None and earlier.status == "cancelled" and same:  # `sds resume` of it
        raise SdsInputError(
            f"release {release_id!r} is closed: it was cancelled, or it failed where no resume "
            "can finish it (nothing charged, or counts too small to release), and what it "
            "drew stays charged; there is nothing to resume. Start a new release (leave out "
            "--release-id to get a fresh one)"
        )
    if earlier is not None and earlier.status != "open" and not unpublished:
        closed = "failed or was cancelled" if earlier.status == "cancelled" else "completed"
        raise SdsInputError(
            f"release id {release_id!r} was already used by a release that {closed}; "
            "start a new release id (leave out --release-id to get a fresh one)"
        )
    if before is not None and not same:
        raise SdsInputError(
            f"release {release_id!r} was started with other parameters; resume it with "
            f"`sds resume {release_id}` (same parameters) or start a new release id"
        )
    if (
        ledger.budget(run.dataset) is None
        and params.default_budget is not None
        and params.period is None  # a period's budget is set per period, never by default
    ):
        ledger.set_budget(
            run.dataset,
            epsilon=params.default_budget.epsilon,
            delta=params.default_budget.delta,
        )
    ledger.reserve(
        run.dataset,
        release_id,
        planned_charges(params),
        epsilon=run.epsilon,
        delta=run.delta,
        flow_run_id=flow_run_id,
        period=params.period,
        unit=privacy_unit(params.subject_id),
    )
    dirs.paths.create(exist_ok=True)
    atomic_write_json(saved, kept, private=True)
    if params.seed is not None:
        atomic_write_json(dirs.private_dir / "seed.json", {"seed": params.seed}, private=True)
    run.randomness()
    dirs.commitment_key(params.seed)  # the published input fingerprint's key, next to it
    if manifest is None:
        public = params.public_dict() | {"release_id": release_id}
        dirs.write_manifest(
            Manifest.new(release_id=release_id, dataset=run.dataset, parameters=public).data
        )
    return run


@dataclass(frozen=True, slots=True)
class ProtectedCount:
    """The DP record count m as it travels from ``count`` to the aggregate stages.

    A value object, not a bare ``int``: Prefect links task results to later tasks by object
    identity and cannot link small ints (they are shared singletons), so with a bare count the
    run's graph would lose the ``count -> aggregate-k`` edges on small tables.
    """

    value: int
