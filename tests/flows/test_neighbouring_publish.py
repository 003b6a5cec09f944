"""A release publishes only what its guarantee covers (issue #27): neighbouring inputs, same DP
outputs, byte-identical published files.

For every synthesizer (and a release with a subject id) a release runs its stages on an input
D (the stage bodies, as the replay audit calls them), which charges the ledger, draws every DP
output from the release key and checkpoints it. Its home is then copied, and each neighbour
D' of D (one record with a new value, one record turned into a rare combination, one more
record; for subject ids one more subject) is published from a fresh copy: the input is read,
validated, prepared and evaluated again from D', while the DP stages load D's checkpoints, so
the release key and every DP output are held fixed. D itself is republished the same way as
the reference. For the new value, the DP outputs are also re-coded over the neighbour's larger
domain (the new value's 1-way count suppressed), as its own release would code them: what the
domain found in the data holds must not show either (validation.json's rules, Parquet
dictionaries, report labels). Publishing (``tasks/publish.py``'s body: files, report,
explorer, manifest, signature, Prefect artifacts) runs with a frozen clock: the time is public
and not data.

Every published file must be byte-identical to the reference's, except the input commitment in
``manifest.json`` (and so ``manifest.sig``): it is a hiding commitment to the input, which must
change with the input; the test checks that it is not the plain hash and that the private key
opens it. The Prefect artifacts must be identical too. As a control, the custodian's private
evaluation does change with the input (it is computed from it), so any published field copied
from it would fail the test.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from flows.release import run_stages
from release_store.audit.signing import signing_key, verify_signed_release
from release_store.config import build_params, load_config
from release_store.config.release_params import ReleaseParams
from release_store.executor.local import LocalExecutor
from release_store.inputs.commitment import input_commitment
from release_store.report.custodian import CUSTODIAN_EVALUATION
from release_store.run import stages
from release_store.run.release_run import ReleaseRun, reserve
from release_store.run.workdir import COMMITMENT_KEY_FILE, atomic_write_json
from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from tests.helpers import EXAMPLE

pytestmark = pytest.mark.slow

RID = "neighbour-test"
FROZEN = datetime(2026, 1, 1, tzinfo=UTC)
N_ROWS = 300

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
    third subject has a second, identical row: its rows are joined into one record)."""
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
    return out


NEW_LABELS = {"city": "Zq7-new-city", "puma": "99000-100000"}
"""The labels :func:`_new_value` adds to the data's domain (the PUMA 99500's bin)."""


def _new_value(rows: Rows) -> Rows:
    """One record (the last: a subject of one row) gets a city and a PUMA bin no other record
    has."""
    return [*rows[:-1], rows[-1] | {"city": "Zq7-new-city", "puma": "99500"}]


def _rare_combination(rows: Rows) -> Rows:
    """One record (the last) becomes a combination of existing values no other record holds."""
    rare = {"sex": "0", "age": "119", "educ": "16", "married": "0", "inc_cat": "above 150k"}
    return [*rows[:-1], rows[-1] | rare | {"income": "9999999"}]


def _one_more(rows: Rows) -> Rows:
    """One more record (with subject ids: one more subject, with two rows)."""
    extra = rows[7] | {"pid": "p-extra-subject"}
    return [*rows, extra, extra]


NEIGHBOURS: dict[str, Callable[[Rows], Rows]] = {
    "new value": _new_value,
    "rare combination": _rare_combination,
    "one more": _one_more,
}


def _write(path: Path, rows: Rows) -> None:
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _body(task: Any, *, wait_for: list[Any] | None = None, **kwargs: Any) -> Any:
    return task.fn(**kwargs)


class _Frozen(datetime):
    """A clock stopped at FROZEN (the manifest's and the ledger's times are not data)."""

    @classmethod
    def now(cls, tz: Any = None) -> _Frozen:  # type: ignore[override]
        return cls.fromtimestamp(FROZEN.timestamp(), tz)


@dataclass(frozen=True)
class Publication:
    """What one publish wrote: the release's files, the Prefect artifacts, and the private
    values the checks need (the input's sha256, the commitment key, the custodian evaluation)."""

    files: dict[str, bytes]
    artifacts: list[tuple[str, dict[str, Any]]]
    input_sha256: str
    commitment_key: bytes
    custodian_evaluation: bytes
    release_dir: Path


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


def _in_neighbour_domain(obj: Any, extra: Mapping[str, str]) -> Any:
    """The same DP output (aggregates or records) over a domain that also holds ``extra``.

    A release of the neighbour with a new value prepares a domain that holds it; its 1-way
    count is suppressed, so the DP outputs can be the same combinations and counts, coded over
    that larger domain. Published files must not see the difference.
    """
    domain, maps = _widened(obj.domain, extra)
    if isinstance(obj, AggregateSet):
        ids = np.concatenate(
            [domain.offsets[c] + m for c, m in enumerate(maps)] or [np.zeros(0, np.int32)]
        ).astype(np.int32)
        by_len = {k: CombinationCounts(ids[cc.attrs], cc.counts) for k, cc in obj.by_len.items()}
        return AggregateSet(
            domain, obj.reporting_length, by_len, obj.protected_number_of_records, obj.is_dp
        )
    codes = obj.codes.copy()
    for c, m in enumerate(maps):
        present = codes[:, c] >= 0
        codes[present, c] = m[codes[present, c]]
    return PreparedTable(domain, codes, obj.multi_value_columns)


def _publish(
    base: Path,
    home: Path,
    params: ReleaseParams,
    monkeypatch: pytest.MonkeyPatch,
    new_labels: Mapping[str, str] | None = None,
) -> Publication:
    """Publish the release of ``base`` (a home whose DP stages are done) from ``params.input``.

    A fresh copy of ``base``: the input is read, gated, prepared and evaluated again (its
    fingerprint and evaluation are dropped from the private state), the DP stages load their
    checkpoints (with ``new_labels``: coded over the neighbour's larger domain, and the output
    gate runs again on them), then the publish task's body runs with a frozen clock.
    """
    import tasks.publish
    from tasks.validation import validate_output

    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(base, home)
    run = ReleaseRun(params, RID, str(home))
    state = run.dirs.state()
    state.pop("fingerprint", None)
    state["stages"].pop(stages.EVALUATE, None)
    atomic_write_json(run.dirs.private_dir / "state.json", state, private=True)
    timeline = stages.Timeline()
    out = run_stages(run, timeline, LocalExecutor(), call=_body)
    aggregates, synthetic, output_summary = out.aggregates, out.synthetic, out.output_summary
    if new_labels:
        aggregates = _in_neighbour_domain(aggregates, new_labels)
        synthetic = _in_neighbour_domain(synthetic, new_labels)
        output_summary = validate_output.fn(run, synthetic, aggregates, LocalExecutor())
    done = [
        {"name": s["name"], "status": "complete", "started": "t", "finished": "t", "duration_s": 0}
        for s in timeline.done
    ]
    artifacts: list[tuple[str, dict[str, Any]]] = []
    with monkeypatch.context() as m:
        m.setattr("release_store.workspace.home.datetime", _Frozen)
        m.setattr("release_store.ledger.chain.datetime", _Frozen)
        clock = types.SimpleNamespace(perf_counter=lambda: 0.0)
        m.setattr("release_store.run.stages.time", clock)
        m.setattr("release_store.publish.artifacts.time", clock)
        for kind in ("link", "table", "markdown"):
            name = f"create_{kind}_artifact"
            m.setattr(tasks.publish, name, lambda kind=kind, **kw: artifacts.append((kind, kw)))
        released = tasks.publish.publish_release.fn(
            run,
            executor=LocalExecutor(),
            input_sha256=out.input_sha256,
            aggregates=aggregates,
            synthetic=synthetic,
            evaluation=out.evaluation,
            validation={"input": out.input_summary, "output": output_summary},
            stages_done=done,
            noise=out.noise,
        )
    release_dir = Path(released)
    private = run.dirs.private_dir
    return Publication(
        files={
            str(p.relative_to(release_dir)): p.read_bytes()
            for p in sorted(release_dir.rglob("*"))
            if p.is_file()
        },
        artifacts=artifacts,
        input_sha256=out.input_sha256,
        commitment_key=(private / COMMITMENT_KEY_FILE).read_bytes(),
        custodian_evaluation=(private / CUSTODIAN_EVALUATION).read_bytes(),
        release_dir=release_dir,
    )


def _check_commitment(pub: Publication, data: Path) -> str:
    """The manifest commits to the input with the private key, never by its plain hash."""
    manifest = json.loads(pub.files["manifest.json"])
    plain = hashlib.sha256(data.read_bytes()).hexdigest()
    assert pub.input_sha256 == plain
    assert "sha256" not in manifest["input"]
    commitment = str(manifest["input"]["commitment"])
    assert commitment == input_commitment(pub.commitment_key, plain) != plain
    for name, content in pub.files.items():
        assert plain.encode() not in content and plain[:16].encode() not in content, name
    assert verify_signed_release(pub.release_dir).problems == ()
    return commitment


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_neighbouring_inputs_publish_byte_identical_files(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same key and DP outputs, one record changed: every published file and Prefect artifact
    is byte-identical, except the hiding input commitment (manifest.json, manifest.sig)."""
    data, home, base = tmp_path / "in.csv", tmp_path / "home", tmp_path / "base"
    config = tmp_path / "release.toml"
    config.write_text(_config(case))
    rows = _rows(case.subject)
    _write(data, rows)
    params = build_params(
        load_config(config), {"input": str(data), "home": str(home), "release_id": RID}
    )
    run = reserve(params)
    signing_key(run.home)  # the home's signing key exists before either publish
    # every DP stage charged, drawn, saved
    run_stages(run, stages.Timeline(), LocalExecutor(), call=_body)
    shutil.copytree(home, base)

    reference = _publish(base, home, params, monkeypatch)
    ref_commitment = _check_commitment(reference, data)
    for what, neighbour in NEIGHBOURS.items():
        _write(data, neighbour(rows))
        pub = _publish(
            base, home, params, monkeypatch, NEW_LABELS if neighbour is _new_value else None
        )
        commitment = _check_commitment(pub, data)
        assert commitment != ref_commitment, what
        assert pub.files.keys() == reference.files.keys(), what
        differ = sorted(n for n in pub.files if pub.files[n] != reference.files[n])
        assert differ == ["manifest.json", "manifest.sig"], (what, differ)
        same = pub.files["manifest.json"].replace(commitment.encode(), ref_commitment.encode())
        assert same == reference.files["manifest.json"], what
        assert pub.artifacts == reference.artifacts, what
        if what == "one more":  # the control: the private evaluation reads the input
            assert pub.custodian_evaluation != reference.custodian_evaluation
