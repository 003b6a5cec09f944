"""The parameter tables of docs/pipeline.md, generated from the same declarations.

:func:`config_table` renders every release key (from the ReleaseParams JSON schema) and
:func:`core_table` every core parameter object's fields; a test keeps the docs equal to them.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from sds_core.param_fields import field_specs, interval_text
from sds_release.store.config.fields import CORE_CLASSES, CORE_KEYS
from sds_release.store.config.loading import CONFIG_RENAMES
from sds_release.store.config.release_params import ReleaseParams

# -- docs/pipeline.md's tables, generated from the same declarations ---------------------------
_TOML_NAMES = {v: k for k, v in CONFIG_RENAMES.items()}


def config_table() -> str:
    """The config-key table of docs/pipeline.md, from ReleaseParams' JSON schema (the form).

    One row per key, nested keys (``schema.columns[].name``) included: default, allowed values
    and meaning. The DP rows come from the core FieldSpecs through :func:`_core`.
    """
    schema = ReleaseParams.model_json_schema()
    required = set(schema.get("required", ()))
    rows = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    for key, prop in schema["properties"].items():
        shown = _TOML_NAMES.get(key, key)
        rows += _schema_rows(shown, prop, schema["$defs"], key in required)
    return "\n".join(rows) + "\n"


def _schema_rows(key: str, prop: dict[str, Any], defs: dict[str, Any], required: bool) -> list[str]:
    """Table rows of one schema property and, for a nested model, of its fields."""
    branches = [b for b in prop.get("anyOf", [prop]) if b.get("type") != "null"]
    optional = "anyOf" in prop and len(branches) < len(prop["anyOf"])
    (branch,) = branches
    if "default" in prop:
        default = _cell_value(prop["default"])
    else:
        default = "(required)" if required else "empty"
    ref = branch.get("$ref") or branch.get("items", {}).get("$ref")
    allowed = "table" if ref else _allowed(branch)
    if optional:
        allowed = f"{allowed} or none"
    rows = [f"| `{key}` | {default} | {allowed} | {_cell_text(prop.get('description', ''))} |"]
    if ref:
        sub = defs[ref.rsplit("/", 1)[1]]
        prefix = f"{key}[]" if branch.get("type") == "array" else key
        inner = set(sub.get("required", ()))
        for name, p in sub["properties"].items():
            rows += _schema_rows(f"{prefix}.{name}", p, defs, name in inner)
    return rows


def _allowed(branch: dict[str, Any]) -> str:
    kind = branch.get("type")
    if kind in ("integer", "number"):
        return interval_text(
            kind == "integer",
            ge=branch.get("minimum"),
            gt=branch.get("exclusiveMinimum"),
            le=branch.get("maximum"),
            lt=branch.get("exclusiveMaximum"),
        )
    if "enum" in branch:
        return ", ".join(f"`{v}`" for v in branch["enum"])
    if "pattern" in branch:
        return f"id matching `{branch['pattern']}`"
    if branch.get("minLength") == branch.get("maxLength") == 1:
        return "one character"
    names = {"boolean": "true/false", "array": "list", "string": "text"}
    return names.get(str(kind), "see meaning")


def _cell_text(text: str) -> str:
    """``text`` safe in a markdown table cell (no column breaks, no HTML tags)."""
    return text.replace("|", "\\|").replace("<", "&lt;")


def _cell_value(value: Any) -> str:
    if value is None:
        return "none"
    if dataclasses.is_dataclass(value) and value == type(value)():  # type: ignore[misc]
        return f"`{type(value).__name__}()`"
    if value == ():
        return "empty"
    return f"`{json.dumps(value) if isinstance(value, bool | list | dict) else value}`"


def core_table() -> str:
    """docs/pipeline.md's table of the core parameters that are not release keys.

    A release uses their defaults (declared bins and domains, the synthesis target and the
    evaluation's R come from the schema, the DP record count and ``reporting_length``).
    """
    rows = ["| parameter | default | allowed | meaning |", "|---|---|---|---|"]
    for cls in CORE_CLASSES:
        for name, (default, spec) in field_specs(cls).items():
            if CORE_KEYS.get(name) is cls:
                continue
            allowed = "see meaning" if spec.kind is None else spec.allowed()
            row = f"`{cls.__name__}.{name}` | {_cell_value(default)} | {allowed}"
            rows.append(f"| {row} | {_cell_text(spec.description)} |")
    return "\n".join(rows) + "\n"
