"""A release publishes and logs only what its guarantee covers (issues #27, #37): neighbouring
inputs D and D' = D + x, the same DP outputs, byte-identical published files and Prefect logs.

For every synthesizer (and a release with a subject id) the stages that charge the ledger and
draw DP noise (binning, count, aggregate-k; a registry synthesizer's fit) run once on D: they are
charged and their noisy results checkpointed. Those are the DP outputs, held fixed. Then D and D'
are each released by the real ``release`` flow (Prefect tasks, the run logger at INFO as ``sds
release`` runs it) from a copy of that home that keeps only those checkpoints: every other
stage (ingest, validate, prepare, plan, normalize, synthesize, validate-output, evaluate,
publish) runs again on its own input. x is one more record (with a subject id: one more subject,
of two rows) holding a city and a PUMA bin no other record has (the domain found in the data
grows: the DP outputs are re-coded over it, as D''s own release would code them), a rare
combination, and "0" cells in columns not in ``sensitive_zeros`` (the "0" cells warning switches
on). A clock that runs only while the input is read (1 ms a row) makes the stages that read the
data take a time that follows the data, as aggregate-k's follows the number of combinations.

Checked, for each case: every published file is byte-identical except ``manifest.json`` (and so
``manifest.sig``), where only the two hiding commitments differ (the input commitment and the
ledger head's), each opening with its private key to the private value, which no published file
holds in plain; every line the run logged to Prefect (level, logger, text; Prefect's own run ids
aside) is identical; every Prefect artifact of the run is identical. As a control, what is
computed from the data does change, privately: the custodian's evaluation, the "0" cells warning
(in D''s custodian report only) and the stage times (the private timeline).
"""

from __future__ import annotations

import csv
import json
import logging
import re
import shutil
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_release.flows.release import release, run_stages
from sds_release.store.audit.home import audit_home
from sds_release.store.audit.signing import signing_key, verify_signed_release
from sds_release.store.config import build_params, load_config
from sds_release.store.executor.local import LocalExecutor
from sds_release.store.inputs.commitment import input_commitment
from sds_release.store.ledger.anchor import ANCHOR_FILE, anchor_commitment, anchor_key
from sds_release.store.report.custodian import CUSTODIAN_EVALUATION, CUSTODIAN_REPORT
from sds_release.store.run import stages
from sds_release.store.run.release_run import ReleaseRun, reserve
from sds_release.store.run.workdir import (
    COMMITMENT_KEY_FILE,
    KEY_FILE,
    STATE_FILE,
    TIMELINE_FILE,
    atomic_write_json,
)
from tests.helpers import EXAMPLE

pytestmark = pytest.mark.slow

RID = "neighbour-test"
FROZEN = datetime(2026, 1, 1, tzinfo=UTC)
N_ROWS = 300
SECONDS_PER_ROW = 0.001

SCHEMA = """
[budget]
epsilon = 1000.0
delta = 0.001

[schema]
min_rows = 10
max_rows = 100000

[[schema.columns]]
name = "sex"
values = ["0", "1"]
nullable = false

[[schema.columns]]
name = "age"
type = "integer"
min = 0
max = 120
bins = {{ edges = [0, 30, 50, 70, 121] }}

[[schema.columns]]
name = "educ"
values = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16"]

[[schema.columns]]
name = "married"
values = ["0", "1"]

[[schema.columns]]
name = "inc_cat"
values = ["less 10k", "10k-20k", "20k-30k", "30k-40k", "40k-50k", "50k-60k", "60k-80k",
          "80k-100k", "100k-150k", "above 150k"]

[[schema.columns]]
name = "city"

[[schema.columns]]
name = "puma"
type = "integer"
min = 100
max = 99999
bins = {{ width = 1000, origin = 0 }}

[[schema.columns]]
name = "income"
type = "float"
min = -100000
max = 10000000
{income_bins}

[[schema.columns]]
name = "pid"
nullable = false
"""

WIDE = ["sex", "age", "married", "inc_cat", "city", "puma"]
NARROW = ["sex", "age", "married", "city"]
DECLARED = ["sex", "age", "educ", "married", "inc_cat"]


@dataclass(frozen=True)
class Case:
    """One release configuration: its synthesizer, columns and extra TOML keys."""

    name: str
    synthesizer: str
    columns: list[str]
    extra: str = ""
    dp_bins: bool = False
    subject: bool = False


CASES = [
    Case("records", "aggregate-seeded", [*WIDE, "educ", "income"], dp_bins=True),
    Case("model", "aggregate-seeded", WIDE, 'synthesis = "model"\n'),
    Case("histogram-1way", "histogram-1way", WIDE),
    Case("histogram-nway", "histogram-nway", NARROW),
    Case("dirichlet-multinomial", "dirichlet-multinomial", NARROW),
    Case("cathist", "cathist", DECLARED),
    Case("mst", "mst", WIDE),
    Case("aim", "aim", WIDE),
    Case("subject-id", "aggregate-seeded", WIDE, 'subject_id = "pid"\n', subject=True),
]


def _config(case: Case) -> str:
    bins = "bins = { dp_quantiles = 3 }" if case.dp_bins else ""
    return (
        'dataset = "neighbours"\nepsilon = 4.0\nreporting_length = 2\n'
        'sensitive_zeros = ["sex", "married"]\n'
        f'synthesizer = "{case.synthesizer}"\nuse_columns = {json.dumps(case.columns)}\n'
        + case.extra
        + SCHEMA.format(income_bins=bins)
    )


Rows = list[dict[str, str]]


def _rows(subject: bool) -> Rows:
    """N_ROWS records of the example with a city and a subject id (with subject ids, every
    third subject has a second, identical row: its rows are joined into one record). No age
    or income cell holds "0" (the example's zero incomes read "0.0")."""
    out = []
    with open(EXAMPLE, newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            if i == N_ROWS:
                break
            record = {
                **{c: row[c] for c in ("sex", "age", "educ", "married", "inc_cat")},
                "city": ("north", "south", "east", "west")[i % 4],
                "puma": row["puma"],
                "income": row["income"],
                "pid": f"p{i:04d}",
            }
            out += [record, record] if subject and i % 3 == 0 else [record]
    assert not any(r["age"] == "0" or r["income"] == "0" for r in out)
    return out


NEW_LABELS = {"city": "Zq7-new-city", "puma": "99000-100000"}
"""The labels x adds to the data's domain (the PUMA 99500's bin)."""

X = {
    "sex": "0",
    "age": "0",  # "0" in a column not in sensitive_zeros: emptied, and the warning switches on
    "educ": "16",
    "married": "0",
    "inc_cat": "above 150k",
    "city": "Zq7-new-city",
    "puma": "99500",
    "income": "0",
    "pid": "p-extra-subject",
}
"""The record D' holds beyond D: new values, a rare combination, "0" cells."""


def _neighbour(rows: Rows, subject: bool) -> Rows:
    """D + x (with subject ids: one more subject, of two identical rows)."""
    return [*rows, X, X] if subject else [*rows, X]


def _write(path: Path, rows: Rows) -> None:
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _body(task: Any, *, wait_for: list[Any] | None = None, **kwargs: Any) -> Any:
    return task.fn(**kwargs)


class _Clock:
    """Time that passes only while the input is read (:data:`SECONDS_PER_ROW` a row)."""

    def __init__(self) -> None:
        self.t = FROZEN.timestamp()

    def perf_counter(self) -> float:
        return self.t


CLOCK = _Clock()


class _Datetime(datetime):
    """``datetime`` reading :data:`CLOCK` (the manifest's, the ledger's and the stages' times)."""

    @classmethod
    def now(cls, tz: Any = None) -> _Datetime:  # type: ignore[override]
        return cls.fromtimestamp(CLOCK.t, tz)


def _slow_read(read: Any) -> Any:
    """``read_release_input`` whose reading takes :data:`SECONDS_PER_ROW` a row."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        table, digest = read(*args, **kwargs)
        CLOCK.t += SECONDS_PER_ROW * table.num_rows
        return table, digest

    return timed


@dataclass(frozen=True)
class Run:
    """What one release of D or D' published, logged and kept privately."""

    files: dict[str, bytes]
    logs: list[tuple[str, str, str]]
    artifacts: list[tuple[Any, ...]]
    audit_problems: tuple[str, ...]
    signature_problems: tuple[str, ...]
    input_sha256: str
    commitment_key: bytes
    anchor: dict[str, Any]
    release_key: bytes
    custodian_report: str
    custodian_evaluation: bytes
    timeline: dict[str, Any]


@dataclass(frozen=True)
class Releases:
    """One case's two releases: of D (the reference) and of D' = D + x."""

    case: Case
    d: Run
    neighbour: Run


def _widened(domain: Domain, extra: Mapping[str, str]) -> tuple[Domain, list[NDArray[Any]]]:
    """``domain`` with one more label in some columns, and each column's old -> new code map."""
    labels = [
        tuple(sorted({*old, *([extra[c]] if c in extra else [])}))
        for c, old in zip(domain.columns, domain.labels, strict=True)
    ]
    maps = [
        np.array([new.index(x) for x in old], dtype=np.int32)
        for old, new in zip(domain.labels, labels, strict=True)
    ]
    return Domain(domain.columns, tuple(labels)), maps


def _id_map(domain: Domain, new: Domain, maps: list[NDArray[Any]]) -> NDArray[np.int32]:
    """Old attribute id -> new attribute id (ids: a column's offset plus the value's code)."""
    parts = [new.offsets[c] + m for c, m in enumerate(maps)] or [np.zeros(0, np.int32)]
    return np.concatenate(parts).astype(np.int32)


def _recoded(obj: Any, domain: Domain) -> Any:
    """The same DP output (aggregates, records, or an aggregate-k step coded over ``domain``)
    over the domain that also holds :data:`NEW_LABELS`: how D''s release codes them."""
    if isinstance(obj, tuple):  # a registry synthesizer's fit: (records, aggregates)
        return tuple(_recoded(o, o.domain) for o in obj)
    new, maps = _widened(domain, NEW_LABELS)
    ids = _id_map(domain, new, maps)
    if isinstance(obj, dict):  # aggregate-k: the survivors, coded over the data's domain
        if obj.get("domain") is not None:
            return obj  # a declared domain: the data's values do not code it
        survivors = obj["survivors"]
        return obj | {"survivors": CombinationCounts(ids[survivors.attrs], survivors.counts)}
    if isinstance(obj, AggregateSet):
        by_len = {k: CombinationCounts(ids[cc.attrs], cc.counts) for k, cc in obj.by_len.items()}
        return AggregateSet(
            new, obj.reporting_length, by_len, obj.protected_number_of_records, obj.is_dp
        )
    codes = obj.codes.copy()
    for c, m in enumerate(maps):
        present = codes[:, c] >= 0
        codes[present, c] = m[codes[present, c]]
    return PreparedTable(new, codes, obj.multi_value_columns)


def _dp_outputs_only(run: ReleaseRun) -> dict[str, Any]:
    """Drop every checkpoint but the charged stages' (their noisy results, the DP outputs) and
    what preparation recorded: every other stage runs again. Returns the DP outputs."""
    dirs = run.dirs
    state = dirs.state()
    kept = {n: rec for n, rec in state["stages"].items() if stages.spec(n).charges}
    for name, rec in state["stages"].items():
        if name not in kept:
            (dirs.checkpoint_dir / rec["file"]).unlink()
    for key in ("fingerprint", "input_sha256", "zero_shares"):
        state.pop(key, None)
    atomic_write_json(dirs.private_dir / STATE_FILE, state | {"stages": kept}, private=True)
    return {name: dirs.load_checkpoint(name) for name in kept}


def _recode_checkpoints(run: ReleaseRun, outputs: dict[str, Any], domain: Domain) -> None:
    """Save the DP outputs again, coded over the domain of D' (D's domain plus the new labels)."""
    dirs = run.dirs
    for name, value in outputs.items():
        if name == stages.FIT or name.startswith(stages.AGGREGATE):
            state = dirs.state()
            del state["stages"][name]  # saved anew, not compared with D's bytes
            atomic_write_json(dirs.private_dir / STATE_FILE, state, private=True)
            dirs.save_checkpoint(name, _recoded(value, domain))


class _Capture(logging.Handler):
    """Every record the run's loggers send (what Prefect's API handler would send)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[str, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelname, record.name, record.getMessage()))


RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
"""The loggers whose records Prefect sends to the server (its ``api`` handler): the run's logs
a UI user reads."""
_IDS = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@contextmanager
def _run_logs() -> Iterator[_Capture]:
    """Capture the run loggers' records at INFO, the level ``sds release`` sends to the server
    (the test session's Prefect settings log WARNING and up only)."""
    capture = _Capture()
    loggers = [logging.getLogger(name) for name in RUN_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(capture)
        lg.setLevel(logging.INFO)
    try:
        yield capture
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(capture)
            lg.setLevel(level)


def _artifacts(flow_run_id: Any) -> list[tuple[Any, ...]]:
    """Every artifact of the flow run on the server: key, type, description, data."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return sorted(
        (a.key, a.type, a.description, json.dumps(a.data, sort_keys=True, default=str))
        for a in found
    )


def _release(run: ReleaseRun, monkeypatch: pytest.MonkeyPatch) -> Run:
    """Release ``run.params.input`` with the real flow from the home as it is (the DP outputs
    checkpointed), under the clock that runs while the input is read."""
    import sds_release.store.executor.local as local_executor

    with monkeypatch.context() as m, _run_logs() as logs:
        for module in ("workspace.home", "ledger.chain", "ledger.budgets"):
            m.setattr(f"sds_release.store.{module}.datetime", _Datetime)
        clock = types.SimpleNamespace(perf_counter=CLOCK.perf_counter)
        m.setattr("sds_release.store.run.stages.time", clock)
        m.setattr("sds_release.store.publish.artifacts.time", clock)
        read = local_executor.read_release_input
        m.setattr(local_executor, "read_release_input", _slow_read(read))
        state = release(run.params, return_state=True)
    assert state.is_completed(), state.message
    flow_run_id = state.state_details.flow_run_id
    release_dir, private = run.dirs.release_dir, run.dirs.private_dir
    return Run(
        files={
            str(p.relative_to(release_dir)): p.read_bytes()
            for p in sorted(release_dir.rglob("*"))
            if p.is_file()
        },
        logs=[(lvl, name, _IDS.sub("<id>", msg)) for lvl, name, msg in logs.lines],
        artifacts=_artifacts(flow_run_id),
        audit_problems=audit_home(run.home, verify=True).problems,
        signature_problems=tuple(verify_signed_release(release_dir).problems),
        input_sha256=str(run.dirs.state()["input_sha256"]),
        commitment_key=(private / COMMITMENT_KEY_FILE).read_bytes(),
        anchor=json.loads((private / ANCHOR_FILE).read_text()),
        release_key=(private / KEY_FILE).read_bytes(),
        custodian_report=(private / CUSTODIAN_REPORT).read_text(),
        custodian_evaluation=(private / CUSTODIAN_EVALUATION).read_bytes(),
        timeline=json.loads((private / TIMELINE_FILE).read_text()),
    )


@pytest.fixture(scope="module", params=CASES, ids=[c.name for c in CASES])
def releases(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, prefect_server: str
) -> Releases:
    """The DP outputs of D, then the releases of D and of D + x that hold them fixed."""
    case: Case = request.param
    tmp = tmp_path_factory.mktemp(case.name)
    data, home, base = tmp / "in.csv", tmp / "home", tmp / "base"
    config = tmp / "release.toml"
    config.write_text(_config(case))
    rows = _rows(case.subject)
    _write(data, rows)
    params = build_params(
        load_config(config), {"input": str(data), "home": str(home), "release_id": RID}
    )
    with pytest.MonkeyPatch.context() as monkeypatch:
        for module in ("workspace.home", "ledger.chain", "ledger.budgets"):
            monkeypatch.setattr(f"sds_release.store.{module}.datetime", _Datetime)
        run = reserve(params)
        signing_key(run.home)  # the home's signing key exists before either release
        # every DP stage charged, drawn
        out = run_stages(run, stages.Timeline(), LocalExecutor(), call=_body)
    domain = out.aggregates.domain  # the domain the data of D holds (aggregate-k's coding)
    outputs = _dp_outputs_only(run)
    shutil.copytree(home, base)

    def released(rows: Rows, recode: bool) -> Run:
        _write(data, rows)
        shutil.rmtree(home)
        shutil.copytree(base, home)
        if recode:
            _recode_checkpoints(run, outputs, domain)
        with pytest.MonkeyPatch.context() as monkeypatch:
            return _release(run, monkeypatch)

    reference = released(rows, recode=False)
    neighbour = released(_neighbour(rows, case.subject), recode=True)
    return Releases(case, reference, neighbour)


def _opened(run: Run) -> tuple[str, str]:
    """The two commitments of a release's manifest, checked to open with their private keys to
    the private values (the input's sha256, the anchored ledger row's hash), which no published
    file holds in plain."""
    manifest = json.loads(run.files["manifest.json"])
    commitment = str(manifest["input"]["commitment"])
    assert "sha256" not in manifest["input"]
    assert commitment == input_commitment(run.commitment_key, run.input_sha256)
    head = manifest["ledger_head"]
    assert set(head) == {"commitment", "commitment_scheme", "commitment_note"}
    anchored = str(head["commitment"])
    assert (
        anchored == anchor_commitment(anchor_key(run.release_key), run.anchor["hash"])["commitment"]
    )
    for name, content in run.files.items():
        for plain in (run.input_sha256, run.anchor["hash"]):
            assert plain.encode() not in content and plain[:16].encode() not in content, name
    return commitment, anchored


def test_neighbouring_inputs_publish_byte_identical_files(releases: Releases) -> None:
    """Same DP outputs, one record more: every published file is byte-identical, except the
    two hiding commitments in manifest.json (and so manifest.sig); both releases verify."""
    d, nb = releases.d, releases.neighbour
    for run in (d, nb):
        assert run.audit_problems == () and run.signature_problems == ()
    assert nb.files.keys() == d.files.keys()
    differ = sorted(n for n in d.files if nb.files[n] != d.files[n])
    ours, theirs = (json.loads(run.files["manifest.json"]) for run in (d, nb))
    keys = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
    assert differ == ["manifest.json", "manifest.sig"], (differ, keys)
    assert keys == ["input", "ledger_head"], keys  # their commitments (below)
    same = nb.files["manifest.json"]
    for theirs, ours in zip(_opened(nb), _opened(d), strict=True):
        assert theirs != ours  # hiding commitments: they must change with the input
        same = same.replace(theirs.encode(), ours.encode())
    assert same == d.files["manifest.json"]


def test_neighbouring_inputs_log_identical_lines(releases: Releases) -> None:
    """Every line the run sends to Prefect (what a UI user reads) is the same for D and D',
    whatever the data: no "0" cells warning, no stage time of a stage that reads the data."""
    d, nb = releases.d, releases.neighbour
    assert any("count: resumed from its checkpoint" in msg for _, _, msg in d.logs) or (
        releases.case.synthesizer != "aggregate-seeded"
    )
    assert any(msg.startswith("publish: ") for _, _, msg in d.logs)
    assert nb.logs == d.logs


def test_neighbouring_inputs_give_identical_prefect_artifacts(releases: Releases) -> None:
    """The run's Prefect artifacts (links, spend, by-length and noise tables, the summary, the
    budget table, progress) are the same for D and D'."""
    assert releases.d.artifacts and releases.neighbour.artifacts == releases.d.artifacts


def test_what_the_data_changes_stays_with_the_custodian(releases: Releases) -> None:
    """The control: the evaluation against the data, the "0" cells warning and the stage
    times change with the input, in the private workspace only (the custodian report)."""
    d, nb = releases.d, releases.neighbour
    assert nb.custodian_evaluation != d.custodian_evaluation
    assert "age (under 1% of rows)" in nb.custodian_report
    assert re.search(
        r"holds? &quot;0&quot;, which SDS treats as an empty cell", nb.custodian_report
    )
    assert "&quot;0&quot;" not in d.custodian_report
    ingest = [
        [s["duration_s"] for s in run.timeline["stages"] if s["name"] == stages.INGEST]
        for run in (d, nb)
    ]
    assert ingest[0] != ingest[1]  # the clock followed the data
