"""ReleaseParams: the one typed parameter object of the ``release`` flow, and config loading.

The Prefect UI renders this pydantic model as the run form; the ``sds`` CLI builds it from a TOML
config file plus command-line options (the command line wins). Keys that set a core parameter
(:data:`CORE_KEYS`) take its default, bounds and description from the core dataclass field's
FieldSpec, declared once in ``sds_core``. :func:`dp_params` and :func:`prepare_params` convert it
once, at the task boundary, into the frozen ``sds_core`` dataclasses; :func:`config_table` and
:func:`core_table` render the tables of docs/pipeline.md from the same declarations.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sds_core.data.preparation import PrepareParams
from sds_core.errors import SdsInputError, SdsInternalError
from sds_core.evaluation.params import EvaluationParams
from sds_core.marginals.params import DpParams, release_delta
from sds_core.param_fields import field_specs, interval_text
from sds_core.synthesis.params import SynthesisParams

SYNTHESIZERS = (
    "aggregate-seeded",
    "histogram-1way",
    "histogram-nway",
    "dirichlet-multinomial",
    "cathist",
    "mst",
    "aim",
)
"""Every synthesizer name a release accepts: ``aggregate-seeded`` (the SDS stages) and the
registry's names (``sds_core.synthesizers.available()``, which a test keeps equal to this
list). Parameters are checked against it without importing the registry (pandas, numba), so
a bad ``--synthesizer`` is refused in a fraction of a second."""

CORE_KEYS: dict[str, type] = {
    "epsilon": DpParams,
    "delta": DpParams,
    "reporting_length": DpParams,
    "percentile_percentage": DpParams,
    "percentile_epsilon_proportion": DpParams,
    "number_of_records_epsilon_proportion": DpParams,
    "use_columns": PrepareParams,
    "sensitive_zeros": PrepareParams,
    "record_limit": PrepareParams,
    "resolution": EvaluationParams,
    "reconcile_one_way": SynthesisParams,
}
"""Release keys that set a core parameter of the same name: the core field's FieldSpec is their
one declaration (default, bounds, description)."""

RELEASE_OVERRIDES: dict[str, dict[str, Any]] = {
    "record_limit": {"ge": 1},  # the form has no "0 = all rows": leave it empty for all rows
    "resolution": {"default": 100},  # releases compare counts in bins of 100 (core: SDS's 10)
}
"""Where a release deliberately differs from the core declaration (and nowhere else)."""

CORE_CLASSES = (DpParams, SynthesisParams, PrepareParams, EvaluationParams)
"""The core parameter objects a release builds (docs: :func:`core_table`)."""


def _core(key: str) -> Any:
    """The pydantic Field of release key ``key``: the core field's default, bounds and
    description (:data:`CORE_KEYS`), with the key's :data:`RELEASE_OVERRIDES` applied."""
    default, spec = field_specs(CORE_KEYS[key])[key]
    given = {"default_factory": list} if default == () else {"default": default}
    bounds = {"ge": spec.ge, "gt": spec.gt, "le": spec.le, "lt": spec.lt}
    settings = {**given, **bounds, "description": spec.description}
    return Field(**{**settings, **RELEASE_OVERRIDES.get(key, {})})


_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class BinSpec(BaseModel):
    """Data-independent bins for a numeric column: explicit ``edges`` or ``width`` + ``origin``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    edges: list[float] | None = Field(
        None, description="Ascending bin edges, fixed in advance (never read from the data)."
    )
    width: float | None = Field(None, gt=0, description="Equal-width bins of this width.")
    origin: float = Field(0.0, description="Where the equal-width grid starts.")
    dp_quantiles: int | None = Field(
        None,
        ge=2,
        le=100,
        description="This many bins of about equal mass, edges chosen by a DP quantile "
        "mechanism inside the declared [min, max] (costs binning_epsilon_proportion of ε, its "
        "own ledger stage 'binning').",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> BinSpec:
        kinds = sum(x is not None for x in (self.edges, self.width, self.dp_quantiles))
        if kinds != 1:
            raise ValueError("give exactly one of 'edges', 'width' or 'dp_quantiles'")
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
        if self.bins is not None and self.bins.dp_quantiles is not None:
            if self.min is None or self.max is None or not self.min < self.max:
                raise ValueError(
                    f"column {self.name!r}: bins.dp_quantiles needs a declared range (min < max): "
                    "the DP quantile edges are chosen inside it; add min and max to the column"
                )
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
    """Everything one DP release needs. Defaults are the SDS / pac-synth defaults.

    The keys of :data:`CORE_KEYS` are declared by the core parameter objects (one FieldSpec
    each); only :data:`RELEASE_OVERRIDES` departs from them.
    """

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
    ledger: str | None = Field(
        None,
        description="Ledger URL: sqlite:///PATH or postgresql://USER@HOST/DB; empty = "
        "$SDS_LEDGER_URL, else SQLite in the home. Keep passwords in PGPASSWORD or ~/.pgpass.",
    )
    delimiter: str = Field(",", min_length=1, max_length=1, description="CSV field delimiter.")
    epsilon: float = _core("epsilon")
    delta: float | None = _core("delta")
    reporting_length: int = _core("reporting_length")
    percentile_percentage: int = _core("percentile_percentage")
    percentile_epsilon_proportion: float = _core("percentile_epsilon_proportion")
    number_of_records_epsilon_proportion: float = _core("number_of_records_epsilon_proportion")
    synthesizer: str = Field(
        "aggregate-seeded", description=f"Synthesizer: one of {', '.join(SYNTHESIZERS)}."
    )
    synthesis: Literal["records", "model"] = Field(
        "records",
        description="aggregate-seeded only: 'records' builds records from the DP aggregates "
        "(SDS); 'model' fits one consistent distribution to them and samples it (post-processing, "
        "no extra budget; docs/consistent-model.md).",
    )
    reconcile_one_way: bool = _core("reconcile_one_way")
    max_model_bytes: int = Field(
        2 * 1024**3,
        ge=1,
        description="Largest working memory a fitted model (synthesis 'model', mst, aim) may need; "
        "checked before anything is charged.",
    )
    binning_epsilon_proportion: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Share of ε spent choosing DP quantile bin edges (only when the schema asks "
        "for bins = { dp_quantiles = q }); the rest goes to the synthesizer.",
    )
    seed: int | None = Field(
        None,
        ge=0,
        description="Testing only: derive the release key from this seed. Anyone "
        "who knows it can regenerate the noise; leave empty for real releases.",
    )
    use_columns: list[str] = _core("use_columns")
    sensitive_zeros: list[str] = _core("sensitive_zeros")
    subject_id: str | None = Field(
        None,
        description="Column identifying the person: their rows are joined into one record, so "
        "the privacy unit is the subject. Never released; needs use_columns.",
    )
    record_limit: int | None = _core("record_limit")
    table_schema: TableSchema | None = Field(
        None, description="Declared schema the input is validated against before any spend."
    )
    default_budget: LifetimeBudget | None = Field(
        None, description="Lifetime budget set for the dataset if the ledger has none yet."
    )
    resolution: int = _core("resolution")
    executor: Literal["local", "dask"] = Field(
        "local",
        description="Where the DP aggregation counts records: 'local' (this process) or 'dask' "
        "(a Dask cluster: dask_address, else $SDS_DASK_ADDRESS, else an embedded LocalCluster). "
        "Same release key, same bytes; no privacy meaning (docs/dask.md).",
    )
    dask_address: str | None = Field(
        None,
        description="executor 'dask': the scheduler, e.g. tcp://host:8786; checked before "
        "anything is charged.",
    )
    dask_partitions: int | None = Field(
        None, ge=1, description="executor 'dask': record partitions (default: from the size)."
    )
    synthetic_records: int | None = Field(
        None,
        ge=1,
        description="aggregate-seeded: how many synthetic records to make (default: the DP "
        "record count). Post-processing of the DP aggregates: no privacy cost.",
    )
    synthetic_part_records: int = Field(
        5_000_000,
        ge=1_000,
        description="Most synthetic records in one Parquet file: a release with more writes "
        "synthetic.parquet as a directory of part files (part-00000.parquet, ...; each listed "
        "with its sha256 and rows in the manifest, checked by sds audit --verify). No privacy "
        "meaning: only how the records are laid out.",
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

    @model_validator(mode="after")
    def _subject_not_released(self) -> ReleaseParams:
        if self.subject_id is not None and (
            not self.use_columns or self.subject_id in self.use_columns
        ):
            raise ValueError(
                f"subject_id {self.subject_id!r} needs use_columns listing the released columns "
                "without it (the subject id itself is never released)"
            )
        return self

    @field_validator("synthesizer")
    @classmethod
    def _known_synth(cls, name: str) -> str:
        if name not in SYNTHESIZERS:
            raise ValueError(
                f"unknown synthesizer {name!r}; choose one of {', '.join(SYNTHESIZERS)}"
            )
        return name

    @model_validator(mode="after")
    def _model_mode(self) -> ReleaseParams:
        if self.synthesis == "model" and self.synthesizer != "aggregate-seeded":
            raise ValueError(
                f"synthesis = 'model' is a mode of the aggregate-seeded synthesizer, not of "
                f"{self.synthesizer!r}; remove it or use synthesizer = 'aggregate-seeded'"
            )
        if self.reconcile_one_way and (
            self.synthesizer != "aggregate-seeded" or self.synthesis != "records"
        ):
            raise ValueError(
                "reconcile_one_way adjusts the records of synthesizer = 'aggregate-seeded' with "
                f"synthesis = 'records', not of {self.synthesizer!r} / {self.synthesis!r}; "
                "remove it or use those settings"
            )
        return self

    def resolved_delta(self) -> float:
        """The release's δ, fixed before reading data: ``delta``, else the one default
        :func:`sds_core.marginals.params.release_delta` of the schema's ``max_rows``."""
        if self.delta is not None:
            return self.delta
        return release_delta(self.table_schema.max_rows if self.table_schema else None)

    def public_dict(self) -> dict[str, Any]:
        """Parameters as published in the manifest: no local path, no secret.

        The input and config are named by file name only (the manifest's ``input.sha256``
        identifies the input) and the seed is only marked as given. Home and ledger are where
        the deployment keeps its books, not properties of the release: they are left out.
        """
        out = self.private_dict()
        for key in ("input", "config"):
            if out[key] is not None:
                out[key] = PurePath(out[key]).name
        out.pop("home")
        out.pop("ledger")
        return out

    def private_dict(self) -> dict[str, Any]:
        """Parameters as kept in the private workspace for ``sds resume`` (full paths; the
        ledger URL without its password; the seed is kept apart, in ``seed.json``)."""
        from release_store.ledger_backends import split_password

        out = self.model_dump(mode="json")
        out["ledger"] = None if self.ledger is None else split_password(self.ledger)[0]
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
def gate_columns(params: ReleaseParams) -> list[str]:
    """The input columns the validation gate reads: with a declared schema and
    ``use_columns``, those and the subject-id column; else [] (every column).

    >>> gate_columns(ReleaseParams(input="x", dataset="d", use_columns=["a"]))
    []
    """
    if not params.use_columns or params.table_schema is None:
        return []
    return [*params.use_columns, *([params.subject_id] if params.subject_id else [])]


def dp_binned_columns(params: ReleaseParams) -> list[ColumnSchema]:
    """The released schema columns whose bins are DP quantiles (in schema order)."""
    if params.table_schema is None:
        return []
    return [
        c
        for c in params.table_schema.columns
        if c.bins is not None
        and c.bins.dp_quantiles is not None
        and (not params.use_columns or c.name in params.use_columns)
    ]


def binning_epsilon(params: ReleaseParams) -> float:
    """ε spent on DP quantile bins (0 when the schema asks for none)."""
    return params.epsilon * params.binning_epsilon_proportion if dp_binned_columns(params) else 0.0


def synthesis_epsilon(params: ReleaseParams) -> float:
    """ε left for the synthesizer once the DP bins are paid (basic composition)."""
    return params.epsilon - binning_epsilon(params)


def dp_params(params: ReleaseParams) -> DpParams:
    """The core DpParams of a release (δ always explicit, fixed before reading the data)."""
    return DpParams(
        epsilon=synthesis_epsilon(params),
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
    from sds_core.data.domain import DeclaredDomain
    from sds_core.data.text import normalize_text

    schema = params.table_schema
    if schema is None or (not params.use_columns and schema.allow_extra_columns):
        return ()
    found = [schema.column(n) for n in params.use_columns] if params.use_columns else schema.columns
    cols = [c for c in found if c is not None and c.values is not None and c.bins is None]
    if not cols or len(cols) < len(found):
        return ()
    return tuple(
        DeclaredDomain(normalize_text(c.name), values=_declared_values(c, params)) for c in cols
    )


def _declared_values(column: ColumnSchema, params: ReleaseParams) -> tuple[str, ...]:
    """A column's declared ``values`` as preparation sees them: normalized, less its empties
    (``""``, and ``"0"`` unless the column keeps its zeros: ``sensitive_zeros``)."""
    from sds_core.data.text import normalize_text
    from sds_core.data.zeros import zero_columns

    kept = zero_columns([column.name], params.sensitive_zeros)  # a name, or "all"
    empty = {""} if kept else {"", "0"}
    return tuple(sorted({normalize_text(v) for v in column.values or ()} - empty))


def _declared_binning(column: ColumnSchema) -> Any:
    """The core Binning of a column's declared ``edges`` or ``width`` bins."""
    from sds_core.data.binning import Binning

    spec = column.bins
    if spec is None or spec.dp_quantiles is not None:
        raise SdsInternalError(f"column {column.name!r} has no declared bins")
    if spec.edges is not None:
        return Binning(column.name, edges=tuple(spec.edges))
    return Binning(column.name, width=spec.width, origin=spec.origin)


def synthesizer_domains(params: ReleaseParams) -> tuple[Any, ...]:
    """The DeclaredDomain of every column a declared-domain synthesizer (``cathist``) releases.

    A column's domain is its declared ``values`` (less what preparation empties: ``""``, and
    ``"0"`` unless the column is in ``sensitive_zeros``), or the labels of its declared ``edges``
    or ``width`` bins over its declared ``[min, max]``. Everything comes from the schema, so a
    column without a declared domain is refused here, before the data is read or any ε charged.
    """
    from sds_core.data.binning import declared_bin_labels
    from sds_core.data.domain import DeclaredDomain
    from sds_core.data.text import normalize_text

    schema = params.table_schema
    if schema is None:
        return ()
    if not params.use_columns and schema.allow_extra_columns:
        raise SdsInputError(
            f"synthesizer {params.synthesizer!r} releases the declared columns only, but the "
            "schema accepts undeclared columns (allow_extra_columns = true): list the columns "
            "to release with use_columns (--use-columns a,b,c) or set allow_extra_columns = false"
        )
    names = params.use_columns or [c.name for c in schema.columns]
    out = []
    for name in names:
        c = schema.column(name)
        if c is None:
            raise SdsInputError(
                f"synthesizer {params.synthesizer!r} needs a declared domain for column "
                f"{name!r}, which the [schema] does not declare: add it to [[schema.columns]]"
            )
        if c.bins is not None and c.bins.dp_quantiles is not None:
            raise SdsInputError(
                f"synthesizer {params.synthesizer!r} needs the bins of column {c.name!r} before "
                "the data is read, but bins.dp_quantiles chooses them during the release: "
                "declare bins = { edges = [...] } or { width = w } instead"
            )
        if c.bins is not None:
            values = declared_bin_labels(_declared_binning(c), c.min, c.max)
        elif c.values is not None:
            values = _declared_values(c, params)
        else:
            raise SdsInputError(
                f"synthesizer {params.synthesizer!r} releases each column's histogram over its "
                f"declared domain, and column {c.name!r} declares none: give it values = [...] "
                "(or, numeric, bins with a min and max), or leave it out with use_columns"
            )
        out.append(DeclaredDomain(normalize_text(c.name), values=values))
    return tuple(out)


def prepare_params(
    params: ReleaseParams,
    dp_edges: dict[str, list[float]] | None = None,
    headers: Sequence[str] = (),
) -> PrepareParams:
    """The core PrepareParams (declared bins from the schema, DP quantile edges from the
    ``binning`` stage in ``dp_edges``).

    ``headers`` are the input's column names, needed to expand ``sensitive_zeros = ["all"]``.
    """
    from sds_core.data.binning import Binning
    from sds_core.data.zeros import ALL_COLUMNS, zero_columns

    bins = []
    for col in params.table_schema.columns if params.table_schema else []:
        if col.bins is not None and (not params.use_columns or col.name in params.use_columns):
            if col.bins.dp_quantiles is not None:
                if dp_edges is None or col.name not in dp_edges:
                    raise SdsInputError(
                        f"column {col.name!r} asks for DP quantile bins but the binning stage "
                        "gave no edges for it (internal order of stages)"
                    )
                bins.append(Binning(col.name, edges=tuple(dp_edges[col.name])))
            else:
                bins.append(_declared_binning(col))
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
        subject_id=params.subject_id,
        record_limit=params.record_limit,
        binning=tuple(bins),
    )


# -- docs/pipeline.md's tables, generated from the same declarations ---------------------------
_TOML_NAMES = {v: k for k, v in _RENAMES.items()}


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
