"""A release's parameters: ReleaseParams, config files, the declared schema, core objects.

- ``fields``: synthesizer names and the core fields a release key takes its declaration from;
- ``schema``: the declared input schema: columns, values, bounds, bins;
- ``loading``: reading a TOML config; one paragraph per parameter error;
- ``release_params``: ``ReleaseParams`` and :func:`build_params`;
- ``core_objects``: ReleaseParams -> DpParams, PrepareParams, declared domains, spends;
- ``doc_tables``: docs/pipeline.md's parameter tables from the same declarations;
- ``periods``: relative periods (``previous-month``) resolved before anything is reserved.
- ``sources``: what ``input`` names (a file or a PostgreSQL URL) and the names published;
- ``deployment``: a deployed run's ``RunOptions``, the ``PINNED`` fields and the pin files.

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "BinSpec": "sds_release.store.config.schema",
    "CONFIG_RENAMES": "sds_release.store.config.loading",
    "CORE_CLASSES": "sds_release.store.config.fields",
    "CORE_KEYS": "sds_release.store.config.fields",
    "ColumnSchema": "sds_release.store.config.schema",
    "ID_PATTERN": "sds_release.store.config.schema",
    "PINNED": "sds_release.store.config.deployment",
    "LifetimeBudget": "sds_release.store.config.release_params",
    "RELATIVE_PERIODS": "sds_release.store.config.periods",
    "RunSlot": "sds_release.store.config.periods",
    "RELEASE_OVERRIDES": "sds_release.store.config.fields",
    "ReleaseParams": "sds_release.store.config.release_params",
    "RunOptions": "sds_release.store.config.deployment",
    "SYNTHESIZERS": "sds_release.store.config.fields",
    "TableSchema": "sds_release.store.config.schema",
    "binning_epsilon": "sds_release.store.config.core_objects",
    "build_params": "sds_release.store.config.release_params",
    "config_table": "sds_release.store.config.doc_tables",
    "core_field": "sds_release.store.config.fields",
    "core_table": "sds_release.store.config.doc_tables",
    "declared_domains": "sds_release.store.config.core_objects",
    "deployed_params": "sds_release.store.config.deployment",
    "describe_validation_error": "sds_release.store.config.loading",
    "dp_binned_columns": "sds_release.store.config.core_objects",
    "dp_params": "sds_release.store.config.core_objects",
    "gate_columns": "sds_release.store.config.core_objects",
    "is_postgres_url": "sds_release.store.config.sources",
    "load_config": "sds_release.store.config.loading",
    "prepare_params": "sds_release.store.config.core_objects",
    "period_of_run": "sds_release.store.config.periods",
    "previous_month": "sds_release.store.config.periods",
    "public_input": "sds_release.store.config.sources",
    "resolve_period": "sds_release.store.config.periods",
    "source_name": "sds_release.store.config.sources",
    "source_refusal": "sds_release.store.config.sources",
    "synthesis_epsilon": "sds_release.store.config.core_objects",
    "synthesizer_domains": "sds_release.store.config.core_objects",
}

__all__ = [
    "CONFIG_RENAMES",
    "CORE_CLASSES",
    "CORE_KEYS",
    "ID_PATTERN",
    "PINNED",
    "RELATIVE_PERIODS",
    "RELEASE_OVERRIDES",
    "SYNTHESIZERS",
    "BinSpec",
    "ColumnSchema",
    "LifetimeBudget",
    "ReleaseParams",
    "RunOptions",
    "RunSlot",
    "TableSchema",
    "binning_epsilon",
    "build_params",
    "config_table",
    "core_field",
    "core_table",
    "declared_domains",
    "deployed_params",
    "describe_validation_error",
    "dp_binned_columns",
    "dp_params",
    "gate_columns",
    "is_postgres_url",
    "load_config",
    "period_of_run",
    "prepare_params",
    "previous_month",
    "public_input",
    "resolve_period",
    "source_name",
    "source_refusal",
    "synthesis_epsilon",
    "synthesizer_domains",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from sds_release.store.config.core_objects import (
        binning_epsilon,
        declared_domains,
        dp_binned_columns,
        dp_params,
        gate_columns,
        prepare_params,
        synthesis_epsilon,
        synthesizer_domains,
    )
    from sds_release.store.config.deployment import PINNED, RunOptions, deployed_params
    from sds_release.store.config.doc_tables import config_table, core_table
    from sds_release.store.config.fields import (
        CORE_CLASSES,
        CORE_KEYS,
        RELEASE_OVERRIDES,
        SYNTHESIZERS,
        core_field,
    )
    from sds_release.store.config.loading import (
        CONFIG_RENAMES,
        describe_validation_error,
        load_config,
    )
    from sds_release.store.config.periods import (
        RELATIVE_PERIODS,
        RunSlot,
        period_of_run,
        previous_month,
        resolve_period,
    )
    from sds_release.store.config.release_params import LifetimeBudget, ReleaseParams, build_params
    from sds_release.store.config.schema import ID_PATTERN, BinSpec, ColumnSchema, TableSchema
    from sds_release.store.config.sources import (
        is_postgres_url,
        public_input,
        source_name,
        source_refusal,
    )
