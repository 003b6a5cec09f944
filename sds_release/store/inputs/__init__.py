"""The sensitive input before any charge: reading, pre-flight, schema checks, the GX gate.

- ``ingest``: reading CSV/Parquet inputs as text columns, with precise errors;
- ``paths``: where the input is (a file, a Parquet directory or glob), checked without Arrow;
- ``holdback``: the control rows held back before a release (``privacy_risk``, ``sds split``);
- ``postgres``: a PostgreSQL table or read-only query as the input (Arrow batches, ordered rows);
- ``commitment``: the input's published fingerprint, a keyed commitment (HMAC-SHA256);
- ``preflight``: checks the CLI runs before Prefect or GX load;
- ``preview``: the preview ``sds plan`` prints (noise, cost and the SDS plan for N; header only);
- ``schema_checks``: the declared schema's checks, evaluated with Arrow;
- ``gate``: the validation gate: the GX suite on the input and on the synthetic output;
- ``gx_suite``: running the GX suite, in the GX checker process when one runs;
- ``periods``: the rows of one period of a periodic dataset; each subject in one period.

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "COMMITMENT_SCHEME": "sds_release.store.inputs.commitment",
    "CONTROL_SHARE": "sds_release.store.inputs.holdback",
    "MIN_SIDE_ROWS": "sds_release.store.inputs.holdback",
    "hold_back": "sds_release.store.inputs.holdback",
    "Check": "sds_release.store.inputs.schema_checks",
    "FLOAT_RE": "sds_release.store.inputs.schema_checks",
    "GateResult": "sds_release.store.inputs.gate",
    "INTEGER_RE": "sds_release.store.inputs.schema_checks",
    "MAX_LINE_BYTES": "sds_release.store.inputs.ingest",
    "NUMERIC_SUFFIX": "sds_release.store.inputs.schema_checks",
    "PARQUET_SUFFIXES": "sds_release.store.inputs.paths",
    "PeriodFilter": "sds_release.store.inputs.periods",
    "Preflight": "sds_release.store.inputs.preflight",
    "ReleasePreview": "sds_release.store.inputs.preview",
    "SchemaValidationError": "sds_release.store.inputs.schema_checks",
    "check_budget": "sds_release.store.inputs.preflight",
    "check_column_names": "sds_release.store.inputs.preflight",
    "check_input_path": "sds_release.store.inputs.paths",
    "commitment_key": "sds_release.store.inputs.commitment",
    "checked_view": "sds_release.store.inputs.schema_checks",
    "count_each_subject_once": "sds_release.store.inputs.periods",
    "csv_digest": "sds_release.store.inputs.ingest",
    "dataset_digest": "sds_release.store.inputs.ingest",
    "dataset_files": "sds_release.store.inputs.paths",
    "dataset_root": "sds_release.store.inputs.paths",
    "describe_failure": "sds_release.store.inputs.schema_checks",
    "failure_message": "sds_release.store.inputs.schema_checks",
    "failure_text": "sds_release.store.inputs.schema_checks",
    "fingerprint_matches": "sds_release.store.inputs.commitment",
    "input_commitment": "sds_release.store.inputs.commitment",
    "input_fingerprint": "sds_release.store.inputs.commitment",
    "input_headers": "sds_release.store.inputs.ingest",
    "input_schema": "sds_release.store.inputs.schema_checks",
    "make_preview": "sds_release.store.inputs.preview",
    "numeric_view": "sds_release.store.inputs.schema_checks",
    "output_schema": "sds_release.store.inputs.gate",
    "preflight": "sds_release.store.inputs.preflight",
    "read_csv_block": "sds_release.store.inputs.ingest",
    "read_dataset": "sds_release.store.inputs.ingest",
    "read_part_file": "sds_release.store.inputs.ingest",
    "read_postgres": "sds_release.store.inputs.postgres",
    "read_release_input": "sds_release.store.inputs.ingest",
    "read_table": "sds_release.store.inputs.ingest",
    "read_table_with_digest": "sds_release.store.inputs.ingest",
    "run_expectations": "sds_release.store.inputs.gx_suite",
    "run_gate": "sds_release.store.inputs.gate",
    "run_suite": "sds_release.store.inputs.gx_suite",
    "schema_checks": "sds_release.store.inputs.schema_checks",
    "schema_failures": "sds_release.store.inputs.schema_checks",
    "schema_frame": "sds_release.store.inputs.gate",
    "select_period": "sds_release.store.inputs.periods",
    "start_checker": "sds_release.store.inputs.gx_suite",
    "stop_checker": "sds_release.store.inputs.gx_suite",
    "table_check_fails": "sds_release.store.inputs.schema_checks",
    "validate_table": "sds_release.store.inputs.gate",
    "view_columns": "sds_release.store.inputs.schema_checks",
    "checker_running": "sds_release.store.inputs.gx_suite",
    "zero_warning": "sds_release.store.inputs.preflight",
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
    "ReleasePreview",
    "SchemaValidationError",
    "check_budget",
    "check_column_names",
    "check_input_path",
    "checked_view",
    "checker_running",
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
    "make_preview",
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
    "start_checker",
    "stop_checker",
    "table_check_fails",
    "validate_table",
    "view_columns",
    "zero_warning",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from sds_release.store.inputs.commitment import (
        COMMITMENT_SCHEME,
        commitment_key,
        fingerprint_matches,
        input_commitment,
        input_fingerprint,
    )
    from sds_release.store.inputs.gate import (
        GateResult,
        output_schema,
        run_gate,
        schema_frame,
        validate_table,
    )
    from sds_release.store.inputs.gx_suite import (
        checker_running,
        run_expectations,
        run_suite,
        start_checker,
        stop_checker,
    )
    from sds_release.store.inputs.holdback import CONTROL_SHARE, MIN_SIDE_ROWS, hold_back
    from sds_release.store.inputs.ingest import (
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
    from sds_release.store.inputs.paths import (
        PARQUET_SUFFIXES,
        check_input_path,
        dataset_files,
        dataset_root,
    )
    from sds_release.store.inputs.periods import (
        PeriodFilter,
        count_each_subject_once,
        select_period,
    )
    from sds_release.store.inputs.postgres import read_postgres
    from sds_release.store.inputs.preflight import (
        Preflight,
        check_budget,
        check_column_names,
        preflight,
        zero_warning,
    )
    from sds_release.store.inputs.preview import ReleasePreview, make_preview
    from sds_release.store.inputs.schema_checks import (
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
