"""Reading a TOML release config, and one paragraph for a parameter error.

:func:`load_config` reads the file (``[schema]`` becomes ``table_schema``); a pydantic
validation error becomes one message naming each bad parameter and its fix.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sds_core.errors import SdsInputError
from sds_release.store.workspace.writers import check_path_writers

CONFIG_RENAMES = {"schema": "table_schema", "budget": "default_budget"}


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML release config into a plain dict (``[schema]`` -> ``table_schema``).

    Raises:
        SdsInputError: the file is missing or not valid TOML, or a folder on its path can be
            written by someone other than this user or root (message names the file or folder).
    """
    p = Path(path)
    if not p.is_file():
        raise SdsInputError(f"config file {str(p)!r} does not exist; check the --config path")
    [p] = check_path_writers([p], "the config")  # read where it is, once no one else can move it
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SdsInputError(f"config file {str(p)!r} is not valid TOML: {e}; fix the file") from e
    return {CONFIG_RENAMES.get(k, k): v for k, v in raw.items()}


def describe_validation_error(e: ValidationError) -> str:
    """One paragraph naming each bad parameter, its rule and the fix."""
    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "parameters"
        msg = err["msg"].removeprefix("Value error, ")
        given = err.get("input")
        shown = "" if isinstance(given, dict | list) else f" (got {given!r})"
        parts.append(f"parameter '{loc}': {msg}{shown}")
    return "; ".join(parts) + ". Fix it in the config file or on the command line."
