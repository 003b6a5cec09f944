"""The sensitive input before any charge: reading, pre-flight, schema checks, the GX gate.

- ``ingest``: reading CSV/Parquet inputs as text columns, with precise errors;
- ``paths``: where the input is (a file, a Parquet directory or glob), checked without Arrow;
- ``holdback``: the control rows held back before a release (``privacy_risk``, ``sds split``);
- ``postgres``: a PostgreSQL table or read-only query as the input (Arrow batches, ordered rows);
- ``commitment``: the input's published fingerprint, a keyed commitment (HMAC-SHA256);
- ``preflight``: checks the CLI runs before Prefect or GX load;
- ``schema_checks``: the declared schema's checks, evaluated with Arrow;
- ``gate``: the validation gate: the GX suite on the input and on the synthetic output;
- ``gx_suite``: running the GX suite, in a worker process when one runs;
- ``periods``: the rows of one period of a periodic dataset; each subject in one period.

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "COMMITMENT_SCHEME": "release_store.inputs.commitment",
    "CONTROL_SHARE": "release_store.inputs.holdback",
    "MIN_SIDE_ROWS": "release_store.inputs.holdback",
    "hold_back": "release_store.inputs.holdback",
    "Check": "release_store.inputs.schema_checks",
    "FLOAT_RE": "release_store.inputs.schema_checks",
    "GateResult": "release_store.inputs.gate",
    "INTEGER_RE": "release_store.inputs.schema_checks",
    "MAX_LINE_BYTES": "release_store.inputs.ingest",
    "NUMERIC_SUFFIX": "release_store.inputs.schema_checks",
    "PARQUET_SUFFIXES": "release_store.inputs.paths",
    "PeriodFilter": "release_store.inputs.periods",
    "Preflight": "release_store.inputs.preflight",
    "SchemaValidationError": "release_store.inputs.schema_checks",
    "check_budget": "release_store.inputs.preflight",
    "check_column_names": "release_store.inputs.preflight",
    "check_input_path": "release_store.inputs.paths",
    "commitment_key": "release_store.inputs.commitment",
    "checked_view": "release_store.inputs.schema_checks",
    "count_each_subject_once": "release_store.inputs.periods",
    "csv_digest": "release_store.inputs.ingest",
    "dataset_digest": "release_store.inputs.ingest",
    "dataset_files": "release_store.inputs.paths",
    "dataset_root": "release_store.inputs.paths",
    "describe_failure": "release_store.inputs.schema_checks",
    "failure_message": "release_store.inputs.schema_checks",
    "failure_text": "release_store.inputs.schema_checks",
    "fingerprint_matches": "release_store.inputs.commitment",
    "input_commitment": "release_store.inputs.commitment",
    "input_fingerprint": "release_store.inputs.commitment",
    "input_headers": "release_store.inputs.ingest",
    "input_schema": "release_store.inputs.schema_checks",
    "numeric_view": "release_store.inputs.schema_checks",
    "output_schema": "release_store.inputs.gate",
    "preflight": "release_store.inputs.preflight",
    "read_csv_block": "release_store.inputs.ingest",
    "read_dataset": "release_store.inputs.ingest",
    "read_part_file": "release_store.inputs.ingest",
    "read_postgres": "release_store.inputs.postgres",
    "read_release_input": "release_store.inputs.ingest",
    "read_table": "release_store.inputs.ingest",
    "read_table_with_digest": "release_store.inputs.ingest",
    "run_expectations": "release_store.inputs.gx_suite",
    "run_gate": "release_store.inputs.gate",
    "run_suite": "release_store.inputs.gx_suite",
    "schema_checks": "release_store.inputs.schema_checks",
    "schema_failures": "release_store.inputs.schema_checks",
    "schema_frame": "release_store.inputs.gate",
    "select_period": "release_store.inputs.periods",
    "start_worker": "release_store.inputs.gx_suite",
    "stop_worker": "release_store.inputs.gx_suite",
    "table_check_fails": "release_store.inputs.schema_checks",
    "validate_table": "release_store.inputs.gate",
    "view_columns": "release_store.inputs.schema_checks",
    "worker_running": "release_store.inputs.gx_suite",
    "zero_warning": "release_store.inputs.preflight",
}

__all__ = [
    "COMMITMENT_SCHEME",
    "CONTROL_SHARE",
    "FLOAT_RE",
    "INTEGER_RE",
    "MAX_LINE_BYTES",
    "MIN_SIDE_ROWS",
    "NUMERIC_SUFFIX",
    "PARQUET_SUFFIXES",
    "Check",
    "GateResult",
    "PeriodFilter",
    "Preflight",
    "SchemaValidationError",
    "check_budget",
    "check_column_names",
    "check_input_path",
    "checked_view",
    "commitment_key",
    "count_each_subject_once",
    "csv_digest",
    "dataset_digest",
    "dataset_files",
    "dataset_root",
    "describe_failure",
    "failure_message",
    "failure_text",
    "fingerprint_matches",
    "hold_back",
    "input_commitment",
    "input_fingerprint",
    "input_headers",
    "input_schema",
    "numeric_view",
    "output_schema",
    "preflight",
    "read_csv_block",
    "read_dataset",
    "read_part_file",
    "read_postgres",
    "read_release_input",
    "read_table",
    "read_table_with_digest",
    "run_expectations",
    "run_gate",
    "run_suite",
    "schema_checks",
    "schema_failures",
    "schema_frame",
    "select_period",
    "start_worker",
    "stop_worker",
    "table_check_fails",
    "validate_table",
    "view_columns",
    "worker_running",
    "zero_warning",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from release_store.inputs.commitment import (
        COMMITMENT_SCHEME,
        commitment_key,
        fingerprint_matches,
        input_commitment,
        input_fingerprint,
    )
    from release_store.inputs.gate import (
        GateResult,
        output_schema,
        run_gate,
        schema_frame,
        validate_table,
    )
    from release_store.inputs.gx_suite import (
        run_expectations,
        run_suite,
        start_worker,
        stop_worker,
        worker_running,
    )
    from release_store.inputs.holdback import CONTROL_SHARE, MIN_SIDE_ROWS, hold_back
    from release_store.inputs.ingest import (
        MAX_LINE_BYTES,
        csv_digest,
        dataset_digest,
        input_headers,
        read_csv_block,
        read_dataset,
        read_part_file,
        read_release_input,
        read_table,
        read_table_with_digest,
    )
    from release_store.inputs.paths import (
        PARQUET_SUFFIXES,
        check_input_path,
        dataset_files,
        dataset_root,
    )
    from release_store.inputs.periods import PeriodFilter, count_each_subject_once, select_period
    from release_store.inputs.postgres import read_postgres
    from release_store.inputs.preflight import (
        Preflight,
        check_budget,
        check_column_names,
        preflight,
        zero_warning,
    )
    from release_store.inputs.schema_checks import (
        FLOAT_RE,
        INTEGER_RE,
        NUMERIC_SUFFIX,
        Check,
        SchemaValidationError,
        checked_view,
        describe_failure,
        failure_message,
        failure_text,
        input_schema,
        numeric_view,
        schema_checks,
        schema_failures,
        table_check_fails,
        view_columns,
    )
