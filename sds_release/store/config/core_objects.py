"""Conversion of ReleaseParams, once at the task boundary, into the frozen ``sds_core`` objects.

No data is needed: the DpParams and PrepareParams of a release, its declared domains, the gate's
columns, the DP-binned columns and the ε each spending step may use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sds_core.data.params import PrepareParams
from sds_core.errors import SdsInputError, SdsInternalError
from sds_core.marginals.params import DpParams
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.config.schema import ColumnSchema


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


PROVISIONAL_REPORTING_LENGTH = 3
"""R of the budget reservation when the SDS plan chooses it (the DpParams default): the plan
then revises the not-yet-charged stages within the same total (``Ledger.revise_plan``)."""


def dp_params(params: ReleaseParams) -> DpParams:
    """The core DpParams of a release (δ always explicit, fixed before reading the data).

    An empty ``reporting_length`` (the SDS plan chooses it after the DP record count) is the
    provisional :data:`PROVISIONAL_REPORTING_LENGTH`; ``sigma_proportions`` is a custom split.
    """
    from sds_core.marginals.params import AccuracyMode

    split = params.sigma_proportions
    return DpParams(
        epsilon=synthesis_epsilon(params),
        delta=params.resolved_delta(),
        reporting_length=params.reporting_length or PROVISIONAL_REPORTING_LENGTH,
        accuracy_mode=AccuracyMode.custom(split) if split else DpParams().accuracy_mode,
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


def declared_sizes(params: ReleaseParams) -> tuple[list[str], list[int]] | None:
    """The released columns and an upper bound on each one's values, from the schema alone:
    its declared ``values``, the labels of its declared bins, or its ``dp_quantiles`` bins.
    None when a released column has none of these (its values are known from the data only)."""
    from sds_core.data.binning import declared_bin_labels
    from sds_core.data.text import normalize_text

    schema = params.table_schema
    if schema is None or (not params.use_columns and schema.allow_extra_columns):
        return None
    names, sizes = [], []
    for name in params.use_columns or [c.name for c in schema.columns]:
        c = schema.column(name)
        if c is None:
            return None
        if c.bins is not None and c.bins.dp_quantiles is not None:
            size = c.bins.dp_quantiles
        elif c.bins is not None:
            size = len(declared_bin_labels(_declared_binning(c), c.min, c.max))
        elif c.values is not None:
            size = len(_declared_values(c, params))
        else:
            return None
        names.append(normalize_text(c.name))
        sizes.append(size)
    return names, sizes


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
    *,
    before_dp_bins: bool = False,
) -> PrepareParams:
    """The core PrepareParams (declared bins from the schema, DP quantile edges from the
    ``binning`` stage in ``dp_edges``).

    ``headers`` are the input's column names, needed to expand ``sensitive_zeros = ["all"]``.
    ``before_dp_bins``: the DP-binned columns without binning (their edges are not drawn yet:
    the checks that run before the ``binning`` charge read their text).
    """
    from sds_core.data.binning import Binning
    from sds_core.data.zeros import ALL_COLUMNS, zero_columns

    bins = []
    for col in params.table_schema.columns if params.table_schema else []:
        if col.bins is not None and (not params.use_columns or col.name in params.use_columns):
            if col.bins.dp_quantiles is not None:
                if before_dp_bins:
                    continue
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
