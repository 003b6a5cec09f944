"""Out-of-core input through the whole ``sds release --executor dask``: a Parquet dataset (a
directory or a glob of part files) and a CSV read in blocks are read, gated, prepared and
evaluated on the workers, with the local release's bytes; a gate failure names the first
failing rows across partitions, as locally, and charges nothing."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("distributed")

from sds_core.errors import SdsInputError
from sds_release.store.cluster.inputs import open_input
from sds_release.store.inputs.ingest import read_release_input
from sds_release.store.inputs.paths import dataset_files
from sds_release.store.workspace.files import sha256_file
from tests.helpers import COLUMNS, EXAMPLE, TINY_CONFIG, charges, run_cli

COMPARED = ("aggregates.parquet", "synthetic.parquet", "evaluation.json")
DP_BINS_CONFIG = TINY_CONFIG.replace(
    "bins = { edges = [0, 30, 50, 70, 121] }", "bins = { dp_quantiles = 4 }"
)


def _frame(n: int = 400) -> pd.DataFrame:
    frame = pd.read_csv(EXAMPLE, dtype=str, keep_default_na=False)[COLUMNS].iloc[:n]
    return frame.reset_index(drop=True)


def _write_parts(frame: pd.DataFrame, folder: Path, bounds: list[int]) -> Path:
    folder.mkdir(parents=True)
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        table = pa.Table.from_pandas(frame.iloc[lo:hi], preserve_index=False)
        pq.write_table(table, folder / f"part-{i:02d}.parquet")
    return folder


@pytest.fixture
def on_client(client: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``--executor dask`` releases connect to the in-process test cluster."""
    monkeypatch.setenv("SDS_DASK_ADDRESS", client.scheduler.address)
    yield client


def _release(data: Path | str, config: Path, home: Path, *extra: str) -> Path:
    code, out, err = run_cli(
        "release",
        str(data),
        "--config",
        str(config),
        "--home",
        str(home),
        "--release-id",
        "ooc",
        "--seed",
        "7",
        "--quiet",
        *extra,
    )
    assert code == 0, err
    return Path(out.strip().splitlines()[-1])


def _digests(rel: Path) -> tuple[dict[str, str], str]:
    """The compared artifacts' sha256 and the input digest the release read (private: the
    manifest publishes only a commitment to it, keyed per release)."""
    state = json.loads((rel.parents[2] / "private" / rel.name / "state.json").read_text())
    return {n: sha256_file(rel / n) for n in COMPARED}, state["input_sha256"]


def test_dataset_and_csv_blocks_release_like_local(
    tmp_path: Path, prefect_server: str, on_client: Any
) -> None:
    """A 3-part dataset (one part of a single row) and a CSV in 3 blocks, with DP quantile bins:
    local and Dask give the same aggregates, synthetic records, evaluation and input digest."""
    frame = _frame()
    folder = _write_parts(frame, tmp_path / "ds", [0, 150, 151, 400])
    csv = tmp_path / "tiny.csv"
    frame.to_csv(csv, index=False)
    config = tmp_path / "dp.toml"
    config.write_text("dask_partitions = 3\n" + DP_BINS_CONFIG)
    results = {}
    for name, data, extra in (
        ("ds-local", folder, ()),
        ("ds-dask", f"{folder}/*.parquet", ("--executor", "dask")),
        ("csv-local", csv, ()),
        ("csv-dask", csv, ("--executor", "dask")),
    ):
        results[name] = _digests(_release(data, config, tmp_path / name, *extra))
    assert results["ds-local"] == results["ds-dask"]
    assert results["csv-local"] == results["csv-dask"]
    assert results["ds-local"][0] == results["csv-local"][0]  # same rows, same release
    # the replay audit of the Dask release takes the dataset as the release named it (a glob):
    # its digest over the part files, the parts read whole, the same artifacts
    code, out, err = run_cli(
        "audit", "ooc", "--replay", "--input", f"{folder}/*.parquet",
        "--home", str(tmp_path / "ds-dask"), "--json",
    )  # fmt: skip
    assert code == 0, err + out
    report = json.loads(out)
    assert report["identical"], [c for c in report["checks"] if c["status"] != "match"]
    ran = on_client.run_on_scheduler(lambda dask_scheduler: set(dask_scheduler.task_prefixes))
    assert {
        "read_part",  # dask names tasks without the leading underscore
        "csv_block",
        "first_failures",
        "numbers",
        "prepare_partition",
        "apply_group",  # the evaluation: one task per worker (ClusterTable.map_reduce)
    } <= ran


def test_synthetic_chunks_on_the_workers_release_like_local(
    tmp_path: Path, prefect_server: str, on_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3,500 synthetic records in parts of 1,000 and chunks of 300 on the workers: the output
    gate, the evaluation and publish read the chunks there, and every artifact derived from the
    records has the local release's bytes (Parquet parts, CSV, evaluation, validation, explorer);
    the replay audit finds the chunk checkpoint equal to its local recomputation."""
    import sds_release.store.workspace.encoding as encoding

    monkeypatch.setattr(encoding, "CHUNK_ROWS", 300)
    csv = tmp_path / "tiny.csv"  # a CSV in 3 blocks (the replay audit reads one file)
    _frame().to_csv(csv, index=False)
    config = tmp_path / "parts.toml"
    config.write_text("dask_partitions = 3\nsynthetic_part_records = 1000\n" + DP_BINS_CONFIG)
    hashes, names = {}, {}
    for name, extra in (("local", ()), ("dask", ("--executor", "dask"))):
        rel = _release(csv, config, tmp_path / name, "--synthetic-records", "3500", *extra)
        manifest = json.loads((rel / "manifest.json").read_text())
        artifacts = manifest["artifacts"]
        names[name] = sorted(n for n in artifacts if n.startswith("synthetic.parquet/"))
        hashes[name] = {n: h for n, h in artifacts.items() if n != "report.html"}
        assert [p["rows"] for p in manifest["synthetic_parts"]["parts"]] == [1000] * 3 + [500]
    assert len(names["dask"]) == 4 and names["local"] == names["dask"]
    assert {"synthetic.csv", "evaluation.json", "validation.json", "explorer.html"} <= set(
        hashes["dask"]
    )
    assert hashes["local"] == hashes["dask"]
    chunk_files = sorted((tmp_path / "dask").rglob("checkpoints/synthesize/chunk-*.npy"))
    assert len(chunk_files) == 14  # parts of 4, 4, 4 and 2 chunks of at most 300 records
    ran = on_client.run_on_scheduler(lambda dask_scheduler: set(dask_scheduler.task_prefixes))
    assert {"batch_and_state", "take", "assemble", "as_text", "first_failures"} <= ran
    # the replay audit (local) recomputes the release: the chunk files equal its whole table
    code, out, _ = run_cli(
        "audit",
        "ooc",
        "--replay",
        "--input",
        str(csv),
        "--home",
        str(tmp_path / "dask"),
        "--json",
    )
    report = json.loads(out)
    assert code == 0 and report["identical"], [
        c for c in report["checks"] if c["status"] != "match"
    ]


def test_reconciled_release_on_dask_like_local(
    tmp_path: Path, prefect_server: str, on_client: Any
) -> None:
    """``reconcile_one_way``: the chunks made on the workers, gathered and reconciled on the
    driver, give the local release's records and evaluation."""
    csv = tmp_path / "tiny.csv"
    _frame().to_csv(csv, index=False)
    config = tmp_path / "reconcile.toml"
    config.write_text("reconcile_one_way = true\n" + TINY_CONFIG)
    hashes = {}
    for name, extra in (("local", ()), ("dask", ("--executor", "dask"))):
        rel = _release(csv, config, tmp_path / name, *extra)
        hashes[name] = {n: sha256_file(rel / n) for n in (*COMPARED, "synthetic.csv")}
    assert hashes["local"] == hashes["dask"]
    ran = on_client.run_on_scheduler(lambda dask_scheduler: set(dask_scheduler.task_prefixes))
    assert {"batch_and_state", "assemble"} <= ran


def test_model_release_on_dask_like_local(
    tmp_path: Path, prefect_server: str, on_client: Any
) -> None:
    """``synthesis = "model"``: the model fitted and sampled on one worker, its records cut
    into chunks there; the output gate, the evaluation and the published files read them there
    and give the local release's bytes."""
    csv = tmp_path / "tiny.csv"
    _frame().to_csv(csv, index=False)
    config = tmp_path / "model.toml"
    config.write_text(TINY_CONFIG.replace('synthesis = "records"', 'synthesis = "model"'))
    _gated_on_the_workers_like_local(csv, config, tmp_path, on_client)


def test_registry_synthesizer_records_on_the_workers_release_like_local(
    tmp_path: Path, prefect_server: str, on_client: Any
) -> None:
    """A registry synthesizer (``histogram-1way``) on the Dask executor: the table is gathered
    to fit it, its records are sent to the workers like SDS records, gated there chunk by chunk,
    and every published file derived from them has the local release's bytes."""
    csv = tmp_path / "tiny.csv"
    _frame().to_csv(csv, index=False)
    config = tmp_path / "registry.toml"
    config.write_text(
        TINY_CONFIG.replace('synthesis = "records"\n', "").replace(
            "reporting_length = 2", 'reporting_length = 2\nsynthesizer = "histogram-1way"'
        )
    )
    _gated_on_the_workers_like_local(csv, config, tmp_path, on_client)


def _gate_tasks(client: Any) -> int:
    """The output gate's tasks on the synthetic chunks the scheduler has ever run (as_text)."""

    def count(dask_scheduler: Any) -> int:
        prefix = dask_scheduler.task_prefixes.get("as_text")
        return 0 if prefix is None else sum(prefix.state_counts.values())

    return int(client.run_on_scheduler(count))


def _gated_on_the_workers_like_local(csv: Path, config: Path, tmp_path: Path, client: Any) -> None:
    """A release of ``csv`` with ``config`` on the local and the Dask executor: the synthetic
    files, the gate's and the explorer have the same bytes, and the gate ran on the workers."""
    names = (*COMPARED, "synthetic.csv", "validation.json", "explorer.html")
    hashes, before = {}, _gate_tasks(client)
    for name, extra in (("local", ()), ("dask", ("--executor", "dask"))):
        rel = _release(csv, config, tmp_path / name, *extra)
        hashes[name] = {n: sha256_file(rel / n) for n in names}
    assert hashes["local"] == hashes["dask"]
    assert _gate_tasks(client) > before  # the records were checked where they were sent


def _failures(text: str) -> list[str]:
    found = re.search(r"expectation\(s\)\): (.*?)\. (Full details|Fix the data)", text, re.S)
    assert found, text
    return found.group(1).split("; ")


def test_gate_failure_names_first_rows_across_partitions(
    tmp_path: Path, tiny_config: Path, prefect_server: str, on_client: Any
) -> None:
    """Bad cells in the second and third parts: the Dask gate reports the global data rows the
    local gate reports, and nothing is charged."""
    frame = _frame()
    frame.loc[[159, 230], "age"] = ["old", "200"]  # data rows 160 (part 2) and 231 (part 3)
    frame.loc[[300, 310], "sex"] = ["", "x"]
    folder = _write_parts(frame, tmp_path / "bad", [0, 120, 200, 400])
    home = tmp_path / "dask"
    code, _, err = run_cli(
        "release",
        str(folder),
        "--config",
        str(tiny_config),
        "--home",
        str(home),
        "--release-id",
        "bad",
        "--quiet",
        "--executor",
        "dask",
    )
    assert code != 0
    assert charges(home) == []
    got = _failures(err)
    assert "column 'age': values must be an integer (first failing data row 160)" in got
    assert "column 'age': values must be between 0.0 and 120.0 (first failing data row 231)" in got
    assert "column 'sex': values must not be empty (first failing data row 301)" in got
    code, _, local_err = run_cli(
        "release", str(folder), "--config", str(tiny_config), "--home", str(tmp_path / "local")
    )
    assert code != 0
    assert got == _failures(local_err)


def test_dataset_digest_and_reading(tmp_path: Path, client: Any) -> None:
    """Part files in name order; the same digest for the directory, a glob, a copy elsewhere
    and the Dask reader; a quoted CSV in blocks parses as the local reader parses it."""
    frame = _frame(300)
    folder = _write_parts(frame, tmp_path / "ds", [0, 100, 250, 300])
    (folder / "notes.txt").write_text("not a part")
    files = dataset_files(folder)
    assert files is not None and [f.name for f in files] == [
        "part-00.parquet",
        "part-01.parquet",
        "part-02.parquet",
    ]
    whole, digest = read_release_input(folder, delimiter=",")
    assert whole.to_pandas().equals(frame)
    copy = shutil.copytree(folder, tmp_path / "elsewhere" / "copy")
    assert read_release_input(f"{copy}/part-*.parquet", delimiter=",")[1] == digest
    data, dask_digest = open_input(client, str(folder), delimiter=",")
    assert dask_digest == digest and data.rows == (100, 150, 50)
    (copy / "part-01.parquet").write_bytes((folder / "part-02.parquet").read_bytes())
    assert read_release_input(copy, delimiter=",")[1] != digest
    with pytest.raises(SdsInputError, match="matches files that are not Parquet"):
        dataset_files(f"{folder}/*")

    quoted = frame.copy()
    quoted.loc[::7, "inc_cat"] = '10k, "or" 20k'
    csv = tmp_path / "quoted.csv"
    quoted.to_csv(csv, index=False)
    local, local_digest = read_release_input(csv, delimiter=",")
    data, csv_digest = open_input(client, str(csv), delimiter=",", partitions=4)
    assert csv_digest == local_digest and len(data.parts) == 4
    parts = client.gather(list(data.parts))
    assert pa.concat_tables(parts).equals(local)
    assert np.array_equal(data.rows, [p.num_rows for p in parts])


def test_worker_side_modules_import_neither_prefect_nor_gx() -> None:
    """The functions the workers run (reading, the gate's checks, preparation, evaluation sums)
    come from modules that import neither Prefect nor Great Expectations."""
    import subprocess
    import sys

    code = (
        "import sys, sds_release.store.cluster.inputs, sds_release.store.cluster.gate, "
        "sds_release.store.cluster.preparation, sds_release.store.cluster.backend, "
        "sds_release.store.cluster.synthesis, sds_core.evaluation.release; "
        "print(sorted(m for m in ('prefect', 'great_expectations') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_zero_cells_warning_reaches_the_terminal_with_dask(
    tmp_path: Path, prefect_server: str, on_client: Any
) -> None:
    """ "0" cells in columns not in sensitive_zeros: a Dask release of a dataset prints the
    local release's pre-flight warning on stderr, once, with the same text (its shares counted
    on the workers)."""
    folder = _write_parts(_frame(), tmp_path / "ds", [0, 150, 151, 400])
    config = tmp_path / "zeros.toml"
    config.write_text(
        'dataset = "tiny"\nepsilon = 2.0\nreporting_length = 2\n\n'
        "[budget]\nepsilon = 100.0\ndelta = 0.001\n"
    )
    warnings = {}
    for name, extra in (("local", ()), ("dask", ("--executor", "dask"))):
        code, _, err = run_cli(
            "release", str(folder), "--config", str(config), "--home", str(tmp_path / name),
            "--release-id", "zeros", "--quiet", *extra,
        )  # fmt: skip
        assert code == 0, err
        warnings[name] = [  # the pre-flight's zero-cell warning (not the records' agreement)
            line for line in err.splitlines() if line.startswith("sds: warning:") and '"0"' in line
        ]
    assert len(warnings["local"]) == 1 and warnings["dask"] == warnings["local"]
    [text] = warnings["dask"]
    assert "sex (" in text and "married (" in text and "--sensitive-zeros sex,married" in text
    assert re.search(r"\(\d+% of rows\)", text)  # the terminal's figure, not the log's band


def test_output_gate_on_chunks_fails_like_the_gx_gate(tmp_path: Path, client: Any) -> None:
    """Synthetic records in 6 chunks on the workers against an output schema that refuses some
    of their labels: the same refusal text (checks, first failing rows over the whole table) as
    the GX gate on the table's frame."""
    from sds_core.data.decoding import to_frame
    from sds_core.data.params import PrepareParams
    from sds_core.data.preparation import prepare
    from sds_release.store.cluster.gate import validate_chunks
    from sds_release.store.cluster.table import ClusterTable
    from sds_release.store.config.schema import ColumnSchema, TableSchema
    from sds_release.store.inputs.gate import output_columns, output_schema, validate_table
    from sds_release.store.inputs.schema_checks import SchemaValidationError

    table = prepare(_frame(300), PrepareParams())
    chunked = ClusterTable.from_table(client, table, 6)  # chunks of 50 records
    assert output_columns(chunked) == list(table.domain.columns)
    sex, educ = table.domain.columns.index("sex"), table.domain.columns.index("educ")
    educ_labels = list(table.domain.labels[educ])
    first_seen = {lab: list(table.codes[:, educ]).index(i) + 1 for i, lab in enumerate(educ_labels)}
    late = max(first_seen, key=first_seen.__getitem__)  # first seen in a later chunk
    assert first_seen[late] > 50
    first_sex_1 = list(table.codes[:, sex]).index(table.domain.labels[sex].index("1")) + 1
    declared = TableSchema(
        columns=[
            ColumnSchema(name="sex", values=["0"]),  # every "1" fails
            ColumnSchema(name="educ", values=[v for v in educ_labels if v != late]),
        ]
    )
    labels = dict(zip(table.domain.columns, table.domain.labels, strict=True))
    schema = output_schema(declared, list(labels), labels)
    with pytest.raises(SchemaValidationError) as dask_error:
        validate_chunks(chunked, schema, private_dir=tmp_path / "dask")
    with pytest.raises(SchemaValidationError) as gx_error:
        frame = to_frame(table, empty_value="", join_multi_value_columns=True)
        validate_table(frame, schema, name="output", private_dir=tmp_path / "gx", what="output")
    got, want = _failures(str(dask_error.value)), _failures(str(gx_error.value))
    assert got == want and len(got) == 2
    [sex_failure] = [f for f in got if f.startswith("column 'sex'")]
    assert sex_failure.endswith(f"(first failing data row {first_sex_1})")
    [educ_failure] = [f for f in got if f.startswith("column 'educ'")]
    assert educ_failure.endswith(f"(first failing data row {first_seen[late]})")
