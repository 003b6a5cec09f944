"""The declared input schema of a release: columns, their types, values and bins.

``[schema]`` in a release config: a :class:`TableSchema` of :class:`ColumnSchema` (type, nulls,
declared values, bounds) with optional :class:`BinSpec` (declared edges or DP quantiles). The
validation gate and the declared domains are built from it.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


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
    values_are: ClassVar[str] = "declared values"
    """What ``values`` lists, in the validation rule's words (``must be one of the N ...``)."""

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
