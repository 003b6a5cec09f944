"""ReleaseParams: the one typed parameter object of the ``release`` flow, and how it is built.

The Prefect UI renders this pydantic model as the run form; the ``sds`` CLI builds it with
:func:`build_params` from a TOML config file plus command-line options (the command line wins).
Keys that set a core parameter take their declaration from :mod:`sds_release.store.config.fields`.
"""

from __future__ import annotations

import math
from pathlib import PurePath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sds_core.data.text import match_key
from sds_core.errors import SdsInputError, SdsInternalError
from sds_core.marginals.params import release_delta
from sds_release.store.config.fields import (
    AGGREGATE_SEEDED,
    SYNTHESIZERS,
    SynthesizerName,
    core_field,
)
from sds_release.store.config.loading import describe_validation_error, load_config
from sds_release.store.config.schema import ID_PATTERN, TableSchema
from sds_release.store.config.sources import public_input, source_refusal
from sds_release.store.ledger.periods import (
    DEFAULT_PERIOD_FORMAT,
    EXAMPLES,
    PeriodFormat,
    label_problem,
)

SYNTHETIC_RECORDS_MAX = 100_000_000
"""The most synthetic records a release may ask for (``synthetic_records``, and the largest
``synthetic_part_records``): whoever may set a run's options must not be able to fill the
worker's disk (10^8 records of the tiny example's 5 columns: about 2 GB of CSV and Parquet).
Leaving ``synthetic_records`` empty (the DP record count) is never capped."""

RECORDS_PER_MAX_ROW = 10
"""``synthetic_records`` may be at most this many times the schema's ``max_rows`` (a public
bound, known before anything is charged; the DP record count is known only after a charge)."""

RELATIVE_PERIODS_FORMAT: dict[str, PeriodFormat] = {"previous-month": "YYYY-MM"}
"""The rules ``period`` may name instead of a period (resolved by
:mod:`sds_release.store.config.periods` before anything is reserved), each with the format of the
period it names."""


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
    input: str = Field(
        description="The sensitive table: a CSV (header row) or Parquet file, a directory or "
        "glob of Parquet part files, a PostgreSQL database postgresql://USER@HOST[:PORT]/DB "
        "(with table or query; the password in PGPASSWORD or ~/.pgpass, never in the URL), or "
        "objects s3://BUCKET/PREFIX/ (Parquet objects; a glob, a comma-separated list, or one "
        "CSV or Parquet object; keys from AWS_* variables or a profile, never in the URL)."
    )
    table: str | None = Field(
        None,
        min_length=1,
        description="PostgreSQL input: the table or view to release (e.g. public.people, "
        "named as in SQL). Published in the manifest; its rows are read in one READ ONLY "
        "transaction.",
    )
    query: str | None = Field(
        None,
        min_length=1,
        description="PostgreSQL input: one SELECT whose result is the table to release, run in "
        "a READ ONLY transaction (a query that writes is refused). Published in the manifest.",
    )
    dataset: str | None = Field(
        None,
        pattern=ID_PATTERN,
        description="Dataset id: the privacy budget is tracked per dataset (required; may "
        "come from the config file).",
    )
    release_id: str | None = Field(
        None,
        pattern=ID_PATTERN,
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
    epsilon: float = core_field("epsilon")
    delta: float | None = core_field("delta")
    reporting_length: int | None = core_field("reporting_length")
    percentile_percentage: int = core_field("percentile_percentage")
    percentile_epsilon_proportion: float = core_field("percentile_epsilon_proportion")
    number_of_records_epsilon_proportion: float = core_field("number_of_records_epsilon_proportion")
    synthesizer: SynthesizerName = Field(
        AGGREGATE_SEEDED, description=f"Synthesizer: one of {', '.join(SYNTHESIZERS)}."
    )
    synthesis: Literal["records", "model"] | None = Field(
        None,
        description="aggregate-seeded only: 'records' builds records from the DP aggregates "
        "(SDS); 'model' fits one consistent distribution to them and samples it (post-processing, "
        "no extra budget; docs/consistent-model.md). Empty (the default): the SDS plan chooses "
        "from the DP record count.",
    )
    sigma_proportions: list[float] | None = Field(
        None,
        description="aggregate-seeded only: the split of the marginals' budget between lengths, "
        "one relative noise scale p_k per length 1..R (σ_k = p_k·σ; a length's budget is "
        "proportional to 1/p_k²). Empty (the default): the SDS plan chooses. Privacy: none, "
        "the total is the same; it decides which lengths are counted more precisely.",
    )
    reconcile_one_way: bool = core_field("reconcile_one_way")
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
    use_columns: list[str] = core_field("use_columns")
    sensitive_zeros: list[str] = core_field("sensitive_zeros")
    subject_id: str | None = Field(
        None,
        description="Column identifying the person: their rows are joined into one record, so "
        "the privacy unit is the subject. Never released; needs use_columns.",
    )
    period_column: str | None = Field(
        None,
        description="Column holding each row's period, a public time key such as a month "
        "('2026-10'): the dataset is then released one period at a time (period), each from its "
        "own budget (sds budget set DATASET --epsilon E --per-period). Never released.",
    )
    period: str | None = Field(
        None,
        min_length=1,
        description="Release only the rows whose period_column holds this value (e.g. 2026-10), "
        "charging that period's budget; required when the dataset's budget is per period. "
        "'previous-month' names the month before the run's schedule slot (a deployment's run "
        "the schedule made; outside deployments: now), in UTC, as YYYY-MM. "
        "Written exactly in period_format (no spaces): each period has one spelling, so one "
        "budget.",
    )
    period_format: PeriodFormat | None = Field(
        None,
        description="How the dataset's periods are written: YYYY-MM (empty: the default; "
        "2026-10), YYYY-Qn (2026-Q4), YYYY (2026) or YYYY-MM-DD (2026-10-31). The period and "
        "every cell of period_column are read in it (a Parquet date column: the period holding "
        "the date; an integer column: 202610); it must be the format recorded with the "
        "dataset's budget (sds budget set --per-period --period-format).",
    )
    record_limit: int | None = core_field("record_limit")
    table_schema: TableSchema | None = Field(
        None, description="Declared schema the input is validated against before any spend."
    )
    default_budget: LifetimeBudget | None = Field(
        None, description="Lifetime budget set for the dataset if the ledger has none yet."
    )
    resolution: int = core_field("resolution")
    executor: Literal["local", "dask"] = Field(
        "local",
        description="Where the DP aggregation counts records: 'local' (this process) or 'dask' "
        "(a Dask cluster: dask_address, else $SDS_DASK_ADDRESS, else an embedded LocalCluster). "
        "Same release key, same bytes; no privacy meaning (docs/dask.md).",
    )
    dask_address: str | None = Field(
        None,
        description="The Dask scheduler, e.g. tcp://host:8786: implies executor 'dask' (refused "
        "with executor 'local'); checked before anything is charged.",
    )
    dask_partitions: int | None = Field(
        None, ge=1, description="executor 'dask': record partitions (default: from the size)."
    )
    publish_to: str | None = Field(
        None,
        description="Copy the finished, signed release to s3://BUCKET/PREFIX/<release-id>/ "
        "(the manifest last); the store's endpoint and keys come from AWS_* variables or a "
        "profile. A failed copy leaves the local release complete: `sds publish` retries.",
    )
    synthetic_records: int | None = Field(
        None,
        ge=1,
        le=SYNTHETIC_RECORDS_MAX,
        description="aggregate-seeded: how many synthetic records to make (default: the DP "
        "record count). Post-processing of the DP aggregates: no privacy cost. At most "
        f"{SYNTHETIC_RECORDS_MAX:,}, and at most {RECORDS_PER_MAX_ROW} times the schema's "
        "max_rows when it declares one (checked before anything is read or charged).",
    )
    synthetic_part_records: int = Field(
        5_000_000,
        ge=1_000,
        le=SYNTHETIC_RECORDS_MAX,
        description="Most synthetic records in one Parquet file: a release with more writes "
        "synthetic.parquet as a directory of part files (part-00000.parquet, ...; each listed "
        "with its sha256 and rows in the manifest, checked by sds audit --verify). No privacy "
        "meaning: only how the records are laid out.",
    )

    privacy_risk: bool = Field(
        False,
        description="Measure anonymeter's singling-out, linkability and inference risks of the "
        "synthetic records (NOT DP; private custodian report only; make anonymeter). The "
        "release first holds back each input row (each subject with subject_id) with chance "
        "20%, by its own coin keyed with the release key, as control rows kept in the private "
        "workspace and never released: the release reads the other rows and stays DP with "
        "respect to the whole input, so it costs no extra budget, and its record count is "
        "theirs. Needs at least 746 rows (subjects).",
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
    def _address_means_dask(self) -> ReleaseParams:
        """A dask_address names a cluster: it implies executor 'dask' and is never ignored."""
        if self.dask_address is None:
            return self
        if "executor" not in self.model_fields_set:
            self.executor = "dask"
        elif self.executor == "local":
            raise ValueError(
                f"dask_address {self.dask_address!r} names a Dask scheduler, but executor is "
                "'local', which counts in this process and never contacts it: remove executor "
                "(a dask_address implies executor 'dask'), or remove dask_address to release "
                "locally"
            )
        return self

    @model_validator(mode="after")
    def _has_dataset(self) -> ReleaseParams:
        if self.dataset is None:
            raise ValueError("no dataset id: give dataset (--dataset ID or in the config file)")
        return self

    @model_validator(mode="after")
    def _source_readable(self) -> ReleaseParams:
        refusal = source_refusal(
            self.input, table=self.table, query=self.query, executor=self.executor
        )
        if refusal is not None:
            raise ValueError(refusal)
        return self

    @field_validator("publish_to")
    @classmethod
    def _publish_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from sds_release.store.storage.urls import ObjectUrl

        try:
            url = ObjectUrl.parse(value)
        except SdsInputError as e:
            raise ValueError(f"publish_to: {e}") from None
        if url.kind == "glob":
            raise ValueError(f"publish_to {value!r} has a wildcard; give the prefix to copy to")
        return str(url)

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

    @model_validator(mode="after")
    def _period_fits(self) -> ReleaseParams:
        column = self.period_column
        if self.period is not None and column is None:
            raise ValueError(
                f"period {self.period!r} selects the rows of one period, but no period_column "
                "names the column holding each row's period: set period_column in the config "
                '(e.g. period_column = "month"), or leave out --period'
            )
        if column is None:
            if self.period_format is not None:
                raise ValueError(
                    f"period_format {self.period_format!r} says how the periods of period_column "
                    "are written, but no period_column is set: set period_column in the config, "
                    "or remove period_format"
                )
            return self
        if self.period is None:
            raise ValueError(
                f"period_column {column!r} makes dataset {self.dataset!r} periodic: each release "
                "releases the rows of one period; pass --period V (e.g. --period 2026-10), or "
                "remove period_column from the config to release the whole table"
            )
        fmt = self.period_format or DEFAULT_PERIOD_FORMAT
        names = RELATIVE_PERIODS_FORMAT.get(self.period)
        if names is not None and names != fmt:
            raise ValueError(
                f"period {self.period!r} names a period written {names}, but the dataset's "
                f"periods are written {fmt} (period_format): name the period itself "
                f"(e.g. --period {EXAMPLES[fmt]})"
            )
        problem = None if names is not None else label_problem(self.period, fmt)
        if problem is not None:
            raise ValueError(f"{problem}. Nothing was read or charged")
        if self.subject_id is not None and match_key(column) == match_key(self.subject_id):
            raise ValueError(
                f"period_column {column!r} is also the subject_id: name the column holding each "
                "row's period (a time key such as a month)"
            )
        if any(match_key(c) == match_key(column) for c in self.use_columns):
            raise ValueError(
                f"use_columns lists the period column {column!r}, which is never released (every "
                f"row of a period holds the same value): remove it from use_columns"
            )
        if self.executor == "dask":
            raise ValueError(
                f"--period {self.period!r} is not supported with executor 'dask' (the period "
                "filter and the subject record run in the flow's process): release periods with "
                '--executor local (or executor = "local" in the config) and no dask_address'
            )
        return self

    @model_validator(mode="after")
    def _records_fit(self) -> ReleaseParams:
        most = self.table_schema.max_rows if self.table_schema is not None else None
        n = self.synthetic_records
        if n is not None and most is not None and n > RECORDS_PER_MAX_ROW * most:
            raise ValueError(
                f"synthetic_records = {n:,} is more than {RECORDS_PER_MAX_ROW} times the "
                f"schema's max_rows ({most:,}): ask for at most "
                f"{RECORDS_PER_MAX_ROW * most:,} records, or leave synthetic_records empty for "
                "the DP record count; nothing was read or charged"
            )
        return self

    @model_validator(mode="after")
    def _risk_local(self) -> ReleaseParams:
        if self.privacy_risk and self.executor == "dask":
            raise ValueError(
                "privacy_risk = true holds back control rows and runs anonymeter in the flow's "
                "process, which executor 'dask' does not support: release with --executor local "
                '(executor = "local" in the config), or remove privacy_risk'
            )
        return self

    @field_validator("synthesizer", mode="before")
    @classmethod
    def _known_synth(cls, name: Any) -> Any:
        if name not in SYNTHESIZERS:
            raise ValueError(
                f"unknown synthesizer {name!r}; choose one of {', '.join(SYNTHESIZERS)}"
            )
        return name

    @property
    def aggregate_seeded(self) -> bool:
        """Whether the release runs the SDS stages (count, plan, aggregate-k, normalize,
        synthesize): the ``aggregate-seeded`` synthesizer; else one registry synthesizer
        (``fit``)."""
        return self.synthesizer == AGGREGATE_SEEDED

    @property
    def length(self) -> int:
        """R once the release runs with it: the configured ``reporting_length``, else the SDS
        plan's (set after the ``plan`` stage; a registry synthesizer's is 3).

        Raises:
            SdsInternalError: read before the plan chose it (a bug).
        """
        if self.reporting_length is None:
            raise SdsInternalError("reporting_length read before the SDS plan chose it")
        return self.reporting_length

    @model_validator(mode="before")
    @classmethod
    def _registry_length(cls, data: Any) -> Any:
        """A registry synthesizer has no SDS plan: an empty reporting_length is the core's 3
        (its evaluation's longest marginals)."""
        if (
            isinstance(data, dict)
            and data.get("synthesizer", AGGREGATE_SEEDED) != AGGREGATE_SEEDED
            and data.get("reporting_length") is None
        ):
            return {**data, "reporting_length": 3}
        return data

    @model_validator(mode="after")
    def _split(self) -> ReleaseParams:
        props = self.sigma_proportions
        if props is not None:
            if not props or not all(math.isfinite(p) and p > 0 for p in props):
                raise ValueError(f"sigma_proportions must be numbers > 0, got {props}")
            if self.reporting_length is not None and len(props) != self.reporting_length:
                raise ValueError(
                    f"sigma_proportions needs one value per length 1..reporting_length "
                    f"({self.reporting_length}), got {len(props)}"
                )
            if self.reporting_length is None:
                raise ValueError(
                    "sigma_proportions needs reporting_length (one value per length); set both "
                    "or neither"
                )
        return self

    @model_validator(mode="after")
    def _model_mode(self) -> ReleaseParams:
        if self.synthesis == "model" and not self.aggregate_seeded:
            raise ValueError(
                f"synthesis = 'model' is a mode of the {AGGREGATE_SEEDED} synthesizer, not of "
                f"{self.synthesizer!r}; remove it or use synthesizer = {AGGREGATE_SEEDED!r}"
            )
        if self.reconcile_one_way and (not self.aggregate_seeded or self.synthesis == "model"):
            raise ValueError(
                f"reconcile_one_way adjusts the records of synthesizer = {AGGREGATE_SEEDED!r} with "
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

        The input and config are named by file name only (the manifest's ``input.commitment``
        identifies the input; a PostgreSQL input by its URL, which holds no password) and the
        seed is only marked as given. Home and ledger are where
        the deployment keeps its books, not properties of the release: they are left out.
        """
        out = self.private_dict()
        out["input"] = public_input(out["input"])
        if out["config"] is not None:
            out["config"] = PurePath(out["config"]).name
        out.pop("home")
        out.pop("ledger")
        out.pop("publish_to", None)  # where a copy goes, like the home: not of the release
        return out

    def private_dict(self) -> dict[str, Any]:
        """Parameters as kept in the private workspace for ``sds resume`` (full paths; the
        ledger URL without its password; the seed is kept apart, in ``seed.json``)."""
        from sds_release.store.ledger.backends import split_password

        out = self.model_dump(mode="json")
        out["ledger"] = None if self.ledger is None else split_password(self.ledger)[0]
        out["seed"] = "given (withheld)" if self.seed is not None else None
        out["delta"] = self.resolved_delta()
        if out["publish_to"] is None:  # no copy asked: the record of releases before it
            out.pop("publish_to")
        if out["period_format"] is None:  # no period, or the default: files as before formats
            out.pop("period_format")
        return out


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
