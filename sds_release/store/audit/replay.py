"""Replaying a past release: what it recorded, its throwaway workdir, and the byte comparison.

``sds audit RELEASE_ID --replay --input PATH`` (driven by ``sds_release/flows/replay.py``) reruns
the release's own stage tasks on a :class:`~sds_release.store.run.release_run.ReleaseRun` whose home
is a throwaway directory (``private/_replay-*``) holding a copy of the release key, and whose ledger
is the
release's recorded charges, read-only (:class:`~sds_release.store.ledger.replay.ReplayLedger`).
This module loads what the release recorded, builds that run, and compares the result (with
:mod:`sds_release.store.audit.comparison`).
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sds_core.errors import SdsInputError, SdsInternalError
from sds_release.store.audit.comparison import (
    DIFFERS,
    LOCAL_ONLY,
    MATCH,
    NOT_RECORDED,
    NOTE,
    RUN_FACTS,
    Check,
    manifest_differences,
    published_form,
    replay_parameters,
    same_value,
    value_differences,
)
from sds_release.store.cluster.synthesis import StoredSynthetic
from sds_release.store.config.fields import AGGREGATE_SEEDED
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.config.sources import (
    is_local_path,
    is_postgres_url,
    source_name,
)
from sds_release.store.inputs.commitment import fingerprint_matches
from sds_release.store.inputs.ingest import dataset_digest
from sds_release.store.inputs.objects import (
    LISTING_FILE,
    changed_objects,
    list_input,
    object_digest,
)
from sds_release.store.inputs.paths import check_input_path, dataset_files
from sds_release.store.inputs.postgres import read_postgres
from sds_release.store.ledger.backends import LEDGER_FILE
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.replay import ReplayLedger
from sds_release.store.ledger.values import ChargeRow, Reservation
from sds_release.store.run import stages
from sds_release.store.run.release_run import ReleaseRun, planned_charges
from sds_release.store.run.workdir import COMMITMENT_KEY_FILE, KEY_FILE, ReleaseDirs
from sds_release.store.storage.urls import is_object_url
from sds_release.store.workspace.files import atomic_write_bytes, sha256_file
from sds_release.store.workspace.home import MANIFEST, find_release
from sds_release.store.workspace.manifest import Manifest

__all__ = ["RecordedRelease"]

_UNCOMPARED_PARAMETERS = ("input", "home", "config", *LOCAL_ONLY)
"""Parameters a replay sets itself (the input it was given, its throwaway home)."""


@dataclass(frozen=True, slots=True)
class RecordedRelease:
    """What a complete release recorded: manifest, private parameters and state, ledger rows.

    Build it with :meth:`load`; nothing of the home is modified by this class, except the
    throwaway ``private/_replay-*`` directory :meth:`replay_run` creates and removes.
    """

    home: Path
    release_id: str
    dataset: str
    manifest: dict[str, Any]
    private_params: dict[str, Any] | None
    seed: int | None
    commitment_key: bytes | None
    state: dict[str, Any]
    reservation: Reservation
    charges: tuple[ChargeRow, ...]

    @property
    def dirs(self) -> ReleaseDirs:
        """The release's own directories (read only by the replay)."""
        return ReleaseDirs(self.home, self.dataset, self.release_id)

    @classmethod
    def load(cls, home: str | Path, release_id: str) -> RecordedRelease:
        """Load a complete release of ``home`` for a replay.

        Raises:
            SdsInputError: no such published release, not complete, no release key, or no
                ledger reservation; each message says what a replay needs.
        """
        home = Path(home)
        release_dir = find_release(home, release_id)
        if release_dir is None or not (release_dir / MANIFEST).is_file():
            raise SdsInputError(
                f"no published release {release_id!r} in {home / 'releases'}; check the "
                "release id (`sds audit` lists them) and --home"
            )
        manifest = Manifest.load(release_dir / MANIFEST).data
        dataset = str(manifest["dataset"])
        if manifest.get("status") != "complete":
            raise SdsInputError(
                f"release {release_id!r} is {manifest.get('status')!r}, not complete: only a "
                f"published release can be replayed (finish it with `sds resume {release_id}` "
                f"or abandon it with `sds cancel {release_id}`)"
            )
        dirs = ReleaseDirs(home, dataset, release_id)
        if not (dirs.private_dir / KEY_FILE).is_file():
            raise SdsInputError(
                f"the release key {dirs.private_dir / KEY_FILE} is missing: a replay needs the "
                "release's private workspace (its key), so it runs only where the release was "
                "made or from a backup of private/<release-id>/"
            )
        commitment_key = dirs.commitment_key(None, create=False)
        if (manifest.get("input") or {}).get("commitment") is not None and commitment_key is None:
            raise SdsInputError(
                f"the input commitment key {dirs.private_dir / COMMITMENT_KEY_FILE} is missing: "
                "the manifest publishes a keyed commitment to the input, which only that key "
                "opens; restore private/<release-id>/ from a backup"
            )
        if not (home / LEDGER_FILE).is_file():
            raise SdsInputError(
                f"{home} has no ledger ({LEDGER_FILE}); a replay compares the spend with the "
                "ledger that recorded the release: pass the release's --home"
            )
        ledger = Ledger.open(home)  # read only from here on
        reservation = ledger.reservation(release_id)
        if reservation is None:
            raise SdsInputError(
                f"the ledger of {home} has no reservation of release {release_id!r}; pass the "
                "home whose ledger recorded it (--home)"
            )
        saved = dirs.private_dir / "params.json"
        seed_file = dirs.private_dir / "seed.json"
        return cls(
            home=home,
            release_id=release_id,
            dataset=dataset,
            manifest=manifest,
            private_params=json.loads(saved.read_text()) if saved.is_file() else None,
            seed=json.loads(seed_file.read_text())["seed"] if seed_file.is_file() else None,
            commitment_key=commitment_key,
            state=dirs.state(),
            reservation=reservation,
            charges=tuple(ledger.charges(release_id=release_id)),
        )

    @property
    def parameters(self) -> dict[str, Any]:
        """The published parameters (the claim a replay tests)."""
        return dict(self.manifest.get("parameters") or {})

    @property
    def aggregate_seeded(self) -> bool:
        """The release ran the SDS stages (not a registry synthesizer's ``fit``)."""
        return bool(self.parameters.get("synthesizer", AGGREGATE_SEEDED) == AGGREGATE_SEEDED)

    def check_input(self, path: str | Path) -> Check:
        """The input must be what the release read: its sha256 (a Parquet dataset's digest over
        its part files, :func:`~sds_release.store.inputs.ingest.dataset_digest`) opens the
        manifest's input commitment (a release made before commitments: equals its
        ``input.sha256``).

        A PostgreSQL input (a ``postgresql://`` URL): the recorded ``table`` or ``query`` is
        read from it (:func:`~sds_release.store.inputs.postgres.read_postgres`), and the digest of
        its ordered rows must open the commitment.

        Raises:
            SdsInputError: it is not (nothing has run yet).
        """
        if is_postgres_url(str(path)):
            table, query = self.parameters.get("table"), self.parameters.get("query")
            if table is None and query is None:
                raise SdsInputError(
                    f"--input {path} is a PostgreSQL database, but release {self.release_id!r} "
                    "was made from a file: pass that file"
                )
            try:
                _, digest = read_postgres(str(path), table=table, query=query)
            except SdsInputError as e:
                raise SdsInputError(f"--input: {e}") from None
            return self.input_check(digest, str(path))
        if is_object_url(str(path)):
            return self.objects_check(str(path))
        try:
            p = check_input_path(path)
            files = dataset_files(path)  # a Parquet dataset: its digest over the part files
        except SdsInputError as e:
            raise SdsInputError(f"--input: {e}") from None
        if files is not None:
            return self.input_check(dataset_digest(files, [sha256_file(f) for f in files]), str(p))
        return self.input_check(sha256_file(p), str(p))

    def objects_check(self, url: str) -> Check:
        """An ``s3://`` input: its objects listed again (nothing read) must be those the release
        read (their :func:`~sds_release.store.inputs.objects.object_digest` opens the commitment);
        refused naming each object added, removed or replaced since (the private listing)."""
        try:
            objects = list_input(url)
        except SdsInputError as e:
            raise SdsInputError(f"--input: {e}") from None
        digest = object_digest(objects)
        if fingerprint_matches(self.manifest.get("input") or {}, self.commitment_key, digest):
            return self.input_check(digest, url)
        changed = changed_objects(self.dirs.private_dir / LISTING_FILE, objects)
        raise SdsInputError(
            f"the objects of {url} are not the input of release {self.release_id!r}: "
            + ("; ".join(changed[:5]) if changed else "their list (keys, ETags, sizes) differs")
            + " since the release; replay from the objects as they were released (a versioned "
            "bucket keeps them), nothing was recomputed"
        )

    def input_check(self, sha256: str, path: str) -> Check:
        """Check an input's sha256 against the manifest's input commitment (or, for a release
        made before commitments, its plain ``input.sha256``); refuse if it does not match.

        Neither the input's hash nor the commitment key is printed: only the published
        commitment's first characters.
        """
        recorded = self.manifest.get("input") or {}
        field = "input.commitment" if recorded.get("commitment") is not None else "input.sha256"
        shown = str(recorded.get("commitment") or recorded.get("sha256"))[:16]
        if not fingerprint_matches(recorded, self.commitment_key, sha256):
            if is_postgres_url(path):
                name = source_name(
                    path, table=self.parameters.get("table"), query=self.parameters.get("query")
                )
                raise SdsInputError(
                    f"the rows of {name} are not the input of release {self.release_id!r}: "
                    f"their digest does not match the manifest's {field} {shown}…, so the "
                    "table changed since the release (rows added, removed or edited) or the "
                    "URL names another database; replay from the data as it was released "
                    "(nothing was recomputed)"
                )
            raise SdsInputError(
                f"--input {path} is not the input of release {self.release_id!r}: its sha256 "
                f"does not match the manifest's {field} {shown}…; pass the exact file the "
                "release was made from (nothing was recomputed)"
            )
        return Check(stages.INGEST, "input", MATCH, f"opens the manifest's {field} {shown}…")

    def unplanned_parameters(self) -> dict[str, Any]:
        """The published parameters with the fields the SDS plan chose (the manifest's
        ``plan.chosen``) empty again, as the release was started: a replay plans them again
        from its DP record count, so the plan is checked too."""
        chosen = (self.manifest.get("plan") or {}).get("chosen") or []
        unset = {"reconcile_one_way": False}  # the plan turns it on only when it was off
        return {k: (unset.get(k) if k in chosen else v) for k, v in self.parameters.items()}

    def parameter_checks(self) -> list[Check]:
        """Published parameters against the private record made when the release started."""
        if self.private_params is None:
            return [Check("parameters", "private record", NOT_RECORDED, "no params.json")]
        diff = value_differences(self.unplanned_parameters(), published_form(self.private_params))
        if diff:
            return [
                Check(
                    "parameters",
                    "manifest vs private record",
                    DIFFERS,
                    f"the published parameters are not those it ran with: {', '.join(diff)}",
                )
            ]
        return [Check("parameters", "manifest vs private record", MATCH, "same parameters")]

    @contextmanager
    def replay_run(self, input_path: str | Path) -> Iterator[ReleaseRun]:
        """A :class:`ReleaseRun` for the replay, in a throwaway home removed afterwards.

        The throwaway home is ``private/_replay-*`` (mode 0700, next to the keys it copies);
        it holds the release and commitment keys, the published manifest (so the replay keeps
        ``created_at``) and the replay's own checkpoints and artifacts. The ledger is a
        :class:`ReplayLedger`.

        Raises:
            SdsInputError: the recorded parameters no longer validate in this version.
        """
        (self.home / "private").mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="_replay-", dir=self.home / "private"))
        try:
            data = replay_parameters(
                self.unplanned_parameters(),
                input_path=(
                    str(Path(input_path).absolute())
                    if is_local_path(str(input_path))
                    else str(input_path)
                ),
                home=str(tmp),
                seed=self.seed,
            )
            try:
                params = ReleaseParams.model_validate(data)
            except ValidationError as e:
                raise SdsInputError(
                    f"the recorded parameters of release {self.release_id!r} are not valid "
                    f"for this version of sds, so it cannot replay them: {e}"
                ) from None
            run = ReleaseRun(
                params,
                self.release_id,
                str(tmp),
                replay=ReplayLedger(self.reservation, self.charges),
                source_home=str(self.home),
            )
            run.dirs.paths.create()
            key = (self.dirs.private_dir / KEY_FILE).read_bytes()
            atomic_write_bytes(run.dirs.private_dir / KEY_FILE, key, private=True)
            if self.commitment_key is not None:  # absent: a release made before commitments
                atomic_write_bytes(
                    run.dirs.private_dir / COMMITMENT_KEY_FILE, self.commitment_key, private=True
                )
            shutil.copyfile(self.dirs.paths.manifest, run.dirs.paths.manifest)
            yield run
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def published_parameters(self, run: ReleaseRun) -> dict[str, Any]:
        """The parameters the publish task would write, computed from the replay's parameters.

        As ``sds_release/tasks/publish.py`` builds them (``public_dict`` + release id, in model
        order, which the report shows); only the keys a replay sets itself (input, home...) are
        taken from the record, so any other drift shows in the manifest and report comparisons.
        """
        mine = run.params.public_dict() | {"release_id": run.release_id}
        recorded = self.parameters
        return {k: recorded.get(k) if k in _UNCOMPARED_PARAMETERS else v for k, v in mine.items()}

    def plan_check(self, run: ReleaseRun) -> Check:
        """The replay's budget plan against the ledger's reservation of the release."""
        plan = tuple(planned_charges(run.params))
        res = self.reservation
        same_total = math.isclose(res.epsilon, run.epsilon, rel_tol=1e-12) and math.isclose(
            res.delta, run.delta, rel_tol=1e-12
        )
        if plan == res.initial_plan and same_total:
            return Check(stages.BUDGET, "plan vs ledger", MATCH, f"{len(plan)} planned charges")
        mine, reserved = {p.stage: p for p in plan}, {p.stage: p for p in res.initial_plan}
        wrong = sorted(s for s in mine.keys() | reserved.keys() if mine.get(s) != reserved.get(s))
        total = "" if same_total else "the release's total (ε, δ); "
        return Check(
            stages.BUDGET,
            "plan vs ledger",
            DIFFERS,
            f"the recorded parameters plan another spend than the ledger reserved: "
            f"{total}stages {', '.join(wrong) or '(order)'}",
        )

    def charge_check(self, run: ReleaseRun) -> Check:
        """The stages the replay charged (only noted) against the charges the release recorded."""
        ledger = run.replay
        if ledger is None:
            raise SdsInternalError("charge_check needs a replay run")
        recorded = [r.stage for r in self.charges]
        if ledger.unrecorded or sorted(ledger.replayed) != sorted(recorded):
            missing = sorted(set(recorded) - set(ledger.replayed))
            return Check(
                stages.BUDGET,
                "charges",
                DIFFERS,
                f"charged by the replay but not by the release: {ledger.unrecorded or '-'}; "
                f"charged by the release but not the replay: {missing or '-'}",
            )
        return Check(
            stages.BUDGET,
            "charges",
            MATCH,
            f"the {len(recorded)} recorded charges, replayed; nothing was charged",
        )

    def stage_checks(self, run: ReleaseRun, names: list[str]) -> list[Check]:
        """Per stage: the prepared-data fingerprint and every checkpoint, in stage order."""
        out = []
        mine = run.dirs.state()
        for name in names:
            if name == stages.PREPARE:
                theirs, ours = self.state.get("fingerprint"), mine.get("fingerprint")
                out.append(
                    Check(name, "prepared data", NOT_RECORDED, "no fingerprint recorded")
                    if theirs is None
                    else Check(name, "prepared data", MATCH, "same fingerprint")
                    if theirs == ours
                    else Check(name, "prepared data", DIFFERS, "the prepared data differ")
                )
            elif stages.spec(name).checkpoint:
                out.append(self._checkpoint_check(run, name))
        return out

    def _checkpoint_check(self, run: ReleaseRun, name: str) -> Check:
        theirs = self.state.get("stages", {}).get(name)
        ours = run.dirs.state()["stages"].get(name)
        if ours is None:
            return Check(name, "checkpoint", DIFFERS, "the replay did not run this stage")
        if theirs is None:
            return Check(name, "checkpoint", NOT_RECORDED, "the release kept no checkpoint")
        if theirs["sha256"] == ours["sha256"]:
            return Check(name, "checkpoint", MATCH, "identical (noise, results)")
        try:
            published = self.dirs.load_checkpoint(name)
        except SdsInputError:
            return Check(
                name, "checkpoint", DIFFERS, "the release's checkpoint was modified after it ran"
            )
        if isinstance(published, StoredSynthetic):  # a Dask release's records, one file a chunk
            published = published.table(self.dirs.checkpoint_dir)
        replayed = run.dirs.load_checkpoint(name)
        if same_value(published, replayed):
            return Check(name, "checkpoint", MATCH, "equal values (pickled differently)")
        if (
            name == stages.EVALUATE
            and isinstance(published, dict)
            and isinstance(replayed, dict)
            and "privacy_risk" in published
            and same_value(_without_risks(published), _without_risks(replayed))
        ):
            return Check(name, "checkpoint", MATCH, RISKS_NOT_COMPARED)
        return Check(name, "checkpoint", DIFFERS, "the stage computes other values")

    def artifact_checks(self, run: ReleaseRun) -> list[Check]:
        """Every published artifact against the replay's, byte for byte; then the manifest."""
        replayed = run.dirs.manifest() or {}
        listed = self.manifest.get("artifacts") or {}
        names = sorted(set(listed) | set(replayed.get("artifacts") or {}))
        out = []
        for name in names:
            stage = _artifact_stage(name, aggregate_seeded=self.aggregate_seeded)
            ours, theirs = self.dirs.release_dir / name, run.dirs.release_dir / name
            if not ours.is_file():
                out.append(Check(stage, name, DIFFERS, "listed but not published (missing)"))
            elif not theirs.is_file():
                out.append(Check(stage, name, DIFFERS, "published but the replay does not make it"))
            else:
                a, b = sha256_file(ours), sha256_file(theirs)
                edited = "" if listed.get(name) == a else " (and no longer the manifest's sha256)"
                out.append(
                    Check(stage, name, MATCH, f"sha256 {a[:16]}…")
                    if a == b and ours.read_bytes() == theirs.read_bytes()
                    else Check(
                        stage, name, DIFFERS, f"published {a[:16]}… ≠ replayed {b[:16]}…{edited}"
                    )
                )
        diff = manifest_differences(self.manifest, replayed)
        out.append(
            Check(stages.PUBLISH, MANIFEST, DIFFERS, f"differs in {', '.join(diff)}")
            if diff
            else Check(
                stages.PUBLISH,
                MANIFEST,
                MATCH,
                f"same content apart from run facts ({', '.join(RUN_FACTS)})",
            )
        )
        versions = value_differences(self.manifest.get("versions"), replayed.get("versions"))
        if versions:
            out.append(
                Check(
                    stages.PUBLISH,
                    "versions",
                    NOTE,
                    f"released with other versions of: {', '.join(versions)}",
                )
            )
        return out


def _artifact_stage(name: str, *, aggregate_seeded: bool) -> str:
    """The stage whose result an artifact publishes (publish for the report and new files)."""
    if name.startswith("aggregates."):
        return stages.NORMALIZE if aggregate_seeded else stages.FIT
    if name.startswith("synthetic."):
        return stages.SYNTHESIZE if aggregate_seeded else stages.FIT
    # evaluation.json is the agreement of the published files, computed at publish
    return {"validation.json": stages.VALIDATE_OUTPUT}.get(name, stages.PUBLISH)


RISKS_NOT_COMPARED = (
    "equal values; anonymeter's attack-based risks (privacy_risk) were run again but not "
    "compared: its attacks are not reproducible run to run (they are private, not published, "
    "and not DP)"
)


def _without_risks(metrics: dict[str, Any]) -> dict[str, Any]:
    """An evaluate checkpoint without its anonymeter risks."""
    return {k: v for k, v in metrics.items() if k != "privacy_risk"}
