"""ReleaseParams: the one typed parameter object of the ``release`` flow, and config loading.

The Prefect UI renders this pydantic model as the run form; the ``sds`` CLI builds it from a TOML
config file plus command-line options (the command line wins). :func:`dp_params` and
:func:`prepare_params` convert it once, at the task boundary, into the frozen ``sds_core``
dataclasses.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sds_core.errors import SdsInputError

SYNTHESIZERS = (
    "aggregate-seeded",
    "histogram-1way",
    "histogram-nway",
    "dirichlet-multinomial",
    "cathist",
)
"""Every synthesizer name a release accepts: ``aggregate-seeded`` (the SDS stages) and the
registry's names (``sds_core.synthesizers.available()``, which a test keeps equal to this
list). Parameters are checked against it without importing the registry (pandas, numba), so
a bad ``--synthesizer`` is refused in a fraction of a second."""

DEFAULT_DELTA = 1e-6
"""δ of a release when neither the user nor the schema's ``max_rows`` determines it."""

_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class BinSpec(BaseModel):
    """Data-independent bins for a numeric column: explicit ``edges`` or ``width`` + ``origin``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    edges: list[float] | None = Field(
        None, description="Ascending bin edges, fixed in advance (never read from the data)."
    )
    width: float | None = Field(None, gt=0, description="Equal-width bins of this width.")
    origin: float = Field(0.0, description="Where the equal-width grid starts.")

    @model_validator(mode="after")
    def _one_kind(self) -> BinSpec:
        if (self.edges is None) == (self.width is None):
            raise ValueError("give exactly one of 'edges' or 'width'")
        if self.edges is not None and (
            len(self.edges) < 2
            or any(b <= a for a, b in zip(self.edges, self.edges[1:], strict=False))
        ):
            raise ValueError("'edges' must hold at least two strictly ascending numbers")
        return self


class ColumnSchema(BaseModel):
    """Declared schema of one input column (what the validation gate enforces)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Column name as it appears in the header.")
    type: Literal["categorical", "integer", "float"] = Field(
        "categorical", description="categorical (any text), integer or float."
    )
    values: list[str] | None = Field(
        None, description="Declared value set (the public domain); other values are rejected."
    )
    min: float | None = Field(None, description="Smallest allowed value (numeric columns).")
    max: float | None = Field(None, description="Largest allowed value (numeric columns).")
    nullable: bool = Field(True, description="Whether empty cells are allowed.")
    bins: BinSpec | None = Field(None, description="Data-independent bins (numeric columns).")

    @model_validator(mode="after")
    def _numeric_only(self) -> ColumnSchema:
        if self.type == "categorical" and (
            self.min is not None or self.max is not None or self.bins is not None
        ):
            raise ValueError(f"column {self.name!r}: min/max/bins need type 'integer' or 'float'")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"column {self.name!r}: min {self.min} > max {self.max}")
        return self


class TableSchema(BaseModel):
    """Declared schema of the input table (public knowledge, never derived from the data)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    columns: list[ColumnSchema] = Field(description="Every column the input must have.")
    min_rows: int = Field(1, ge=1, description="Fewest rows a valid input has.")
    max_rows: int | None = Field(
        None, ge=1, description="Most rows a valid input has; also fixes the default δ."
    )
    allow_extra_columns: bool = Field(
        False, description="Accept (and ignore) input columns the schema does not declare."
    )

    @field_validator("columns")
    @classmethod
    def _unique(cls, cols: list[ColumnSchema]) -> list[ColumnSchema]:
        names = [c.name for c in cols]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"schema declares these columns twice: {dup}")
        return cols

    def column(self, name: str) -> ColumnSchema | None:
        """The declared column ``name`` or None."""
        return next((c for c in self.columns if c.name == name), None)


class LifetimeBudget(BaseModel):
    """Lifetime (ε, δ) budget given to a dataset the ledger does not know yet."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    epsilon: float = Field(gt=0, description="Total ε all releases of the dataset may spend.")
    delta: float = Field(1e-5, gt=0, lt=1, description="Total δ all releases may spend.")


class ReleaseParams(BaseModel):
    """Everything one DP release needs. Defaults are the SDS / pac-synth defaults."""

    model_config = ConfigDict(extra="forbid")

    config: str | None = Field(
        None, description="TOML release config; its values fill every parameter not given here."
    )
    input: str = Field(description="Path of the sensitive table: CSV (header row) or Parquet.")
    dataset: str | None = Field(
        None,
        pattern=_ID,
        description="Dataset id: the privacy budget is tracked per dataset (required; may "
        "come from the config file).",
    )
    release_id: str | None = Field(
        None,
        pattern=_ID,
        description="Release id; empty = a new one. An unfinished id resumes that release.",
    )
    home: str | None = Field(
        None,
        description="SDS home (ledger, releases, private workspace); default $SDS_HOME or ./.sds",
    )
    delimiter: str = Field(",", min_length=1, max_length=1, description="CSV field delimiter.")
    epsilon: float = Field(
        4.0,
        gt=0,
        le=100,
        description="Privacy loss ε of this release (smaller = more private, more noise).",
    )
    delta: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Privacy failure probability δ; empty = 1/(N·ln N) for the schema's max_rows "
        "N, else 1e-6. Fixed before the data is read, so it never depends on the data.",
    )
    reporting_length: int = Field(
        3, ge=1, le=10, description="R: longest released combination of attributes."
    )
    percentile_percentage: int = Field(
        99,
        ge=0,
        le=100,
        description="Percentile of per-record combination counts used to bound "
        "each record's contribution (higher = less bias, more noise).",
    )
    percentile_epsilon_proportion: float = Field(
        0.01, gt=0, lt=1, description="Share of the marginals' budget spent choosing that bound."
    )
    number_of_records_epsilon_proportion: float = Field(
        0.005, gt=0, lt=1, description="Share of ε spent on the noisy record count."
    )
    synthesizer: str = Field(
        "aggregate-seeded", description=f"Synthesizer: one of {', '.join(SYNTHESIZERS)}."
    )
    seed: int | None = Field(
        None,
        ge=0,
        description="Testing only: derive the release key from this seed. Anyone "
        "who knows it can regenerate the noise; leave empty for real releases.",
    )
    use_columns: list[str] = Field(
        default_factory=list, description="Columns to release (empty = all declared columns)."
    )
    sensitive_zeros: list[str] = Field(
        default_factory=list,
        description="Columns where '0' is a value, not an empty cell (SDS otherwise treats a "
        "'0' cell as empty); ['all'] for every column.",
    )
    record_limit: int | None = Field(None, ge=1, description="Use only the first N data rows.")
    table_schema: TableSchema | None = Field(
        None, description="Declared schema the input is validated against before any spend."
    )
    default_budget: LifetimeBudget | None = Field(
        None, description="Lifetime budget set for the dataset if the ledger has none yet."
    )
    resolution: int = Field(
        100, ge=1, description="Evaluation: counts are compared in bins of this many records."
    )

    @model_validator(mode="before")
    @classmethod
    def _fill_from_config(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("config"):
            cfg = load_config(data["config"])
            cfg.pop("config", None)
            data = {**cfg, **{k: v for k, v in data.items() if v is not None}}
        return data

    @model_validator(mode="after")
    def _has_dataset(self) -> ReleaseParams:
        if self.dataset is None:
            raise ValueError("no dataset id: give dataset (--dataset ID or in the config file)")
        return self

    @field_validator("synthesizer")
    @classmethod
    def _known_synth(cls, name: str) -> str:
        if name not in SYNTHESIZERS:
            raise ValueError(
                f"unknown synthesizer {name!r}; choose one of {', '.join(SYNTHESIZERS)}"
            )
        return name

    def resolved_delta(self) -> float:
        """The release's δ, fixed before reading data (see ``delta``'s description)."""
        if self.delta is not None:
            return self.delta
        n = self.table_schema.max_rows if self.table_schema else None
        if n is not None and n >= 3:
            return min(DEFAULT_DELTA * 100, 1.0 / (n * math.log(n)))
        return DEFAULT_DELTA

    def public_dict(self) -> dict[str, Any]:
        """Parameters as published in the manifest (the seed is only marked as given)."""
        out = self.model_dump(mode="json")
        out["seed"] = "given (withheld)" if self.seed is not None else None
        out["delta"] = self.resolved_delta()
        return out


_RENAMES = {"schema": "table_schema", "budget": "default_budget"}


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML release config into a plain dict (``[schema]`` -> ``table_schema``).

    Raises:
        SdsInputError: the file is missing or not valid TOML (message names the file).
    """
    p = Path(path)
    if not p.is_file():
        raise SdsInputError(f"config file {str(p)!r} does not exist; check the --config path")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SdsInputError(f"config file {str(p)!r} is not valid TOML: {e}; fix the file") from e
    return {_RENAMES.get(k, k): v for k, v in raw.items()}


def build_params(config: dict[str, Any], overrides: dict[str, Any]) -> ReleaseParams:
    """ReleaseParams from config values, with every non-None override winning.

    Raises:
        SdsInputError: a value breaks a rule; the message names the parameter and the fix.
    """
    merged = {**config, **{k: v for k, v in overrides.items() if v is not None}}
    try:
        return ReleaseParams.model_validate(merged)
    except ValidationError as e:
        raise SdsInputError(describe_validation_error(e)) from None


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


# -- conversion to the core parameter objects (no data needed) ----------------------------------
def dp_params(params: ReleaseParams) -> Any:
    """The core DpParams of a release (δ always explicit, fixed before reading the data)."""
    from sds_core.marginals.params import DpParams

    return DpParams(
        epsilon=params.epsilon,
        delta=params.resolved_delta(),
        reporting_length=params.reporting_length,
        percentile_percentage=params.percentile_percentage,
        percentile_epsilon_proportion=params.percentile_epsilon_proportion,
        number_of_records_epsilon_proportion=params.number_of_records_epsilon_proportion,
        declared_domains=declared_domains(params),
    )


def declared_domains(params: ReleaseParams) -> tuple[Any, ...]:
    """DeclaredDomains when the schema declares ``values`` for every used column, else ().

    Used columns are ``use_columns``, or all schema columns when extra input columns are not
    allowed. Binned columns (their labels are bins, not values) disable declaration.
    """
    from sds_core.data.text import normalize_text
    from sds_core.data.zeros import zero_columns
    from sds_core.dp.declared import DeclaredDomain

    schema = params.table_schema
    if schema is None or (not params.use_columns and schema.allow_extra_columns):
        return ()
    found = [schema.column(n) for n in params.use_columns] if params.use_columns else schema.columns
    cols = [c for c in found if c is not None and c.values is not None and c.bins is None]
    if not cols or len(cols) < len(found):
        return ()
    keep_zeros = set(zero_columns([c.name for c in cols], params.sensitive_zeros))
    out = []
    for c in cols:
        empty = {""} if c.name in keep_zeros else {"", "0"}  # prepare's empties
        values = sorted({normalize_text(v) for v in c.values or ()} - empty)
        out.append(DeclaredDomain(normalize_text(c.name), values=tuple(values)))
    return tuple(out)


def prepare_params(params: ReleaseParams, headers: Sequence[str] = ()) -> Any:
    """The core PrepareParams (declared bins from the schema).

    ``headers`` are the input's column names, needed to expand ``sensitive_zeros = ["all"]``.
    """
    from sds_core.data.binning import Binning
    from sds_core.data.preparation import PrepareParams
    from sds_core.data.zeros import ALL_COLUMNS, zero_columns

    bins = []
    for col in params.table_schema.columns if params.table_schema else []:
        if col.bins is not None and (not params.use_columns or col.name in params.use_columns):
            if col.bins.edges is not None:
                bins.append(Binning(col.name, edges=tuple(col.bins.edges)))
            else:
                bins.append(Binning(col.name, width=col.bins.width, origin=col.bins.origin))
    return PrepareParams(
        use_columns=tuple(params.use_columns),
        sensitive_zeros=tuple(
            c
            for c in (
                zero_columns(headers, params.sensitive_zeros)
                if ALL_COLUMNS in {z.strip().lower() for z in params.sensitive_zeros}
                else params.sensitive_zeros
            )
            if not params.use_columns or c in params.use_columns
        ),
        record_limit=params.record_limit,
        binning=tuple(bins),
    )
