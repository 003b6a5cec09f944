"""`sds evaluate`'s utility part: compare a synthetic table with the original (NOT DP).

Reads both files, preprocesses them the same way (optionally as a release config did: used
columns, sensitive zeros, declared bins), and reports the SDS aggregate metrics of
:func:`sds_core.evaluation.metrics.aggregate_metrics` on the exact aggregates of both tables plus
:func:`sds_core.evaluation.metrics.marginal_fidelity`. The result reads the sensitive data: it is
labelled not differentially private and is for the data owner. No Prefect import.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sds_core.data.params import PrepareParams
    from sds_core.data.table import PreparedTable
    from sds_release.store.config.release_params import ReleaseParams


@dataclasses.dataclass(frozen=True, slots=True)
class PreparedReading:
    """How ``sds evaluate`` reads its tables: a release config's preprocessing (used columns,
    sensitive zeros, declared bins; None: the defaults) and the delimiters.

    The original and a control set held back from it are prepared as the release prepared its
    input; synthetic records, whose cells are already bin labels, with the original's
    preprocessing minus the bins and the record limit.
    """

    params: ReleaseParams | None
    original_delimiter: str
    synthetic_delimiter: str

    def prepare_original(self, path: str | Path) -> tuple[PreparedTable, PrepareParams]:
        """The original (or its control set), prepared as the release did, and the preprocessing."""
        from sds_core.data.params import PrepareParams
        from sds_core.data.preparation import prepare
        from sds_release.store.inputs.ingest import read_table

        table = read_table(path, delimiter=self.original_delimiter)
        prep = PrepareParams()
        if self.params is not None:
            from sds_release.store.config.core_objects import prepare_params

            prep = prepare_params(self.params, table.column_names)
        return prepare(table, prep), prep

    def prepare_synthetic(self, path: str | Path, prep: PrepareParams) -> PreparedTable:
        """Synthetic records, prepared with the original's ``prep`` minus bins and record limit."""
        from sds_core.data.preparation import prepare
        from sds_release.store.inputs.ingest import read_table

        return prepare(
            read_table(path, delimiter=self.synthetic_delimiter),
            dataclasses.replace(prep, binning=(), record_limit=None),
        )


def reading(
    config: str | Path | None, original: str | Path, delimiter: str | None
) -> PreparedReading:
    """The :class:`PreparedReading` of ``config`` (None: the defaults) for ``original``.

    Raises:
        SdsInputError: the config is invalid.
    """
    if config is None:
        return PreparedReading(None, delimiter or ",", delimiter or ",")
    from sds_release.store.config import build_params, load_config

    cfg = load_config(config)
    params = build_params(cfg, {"input": str(original), "dataset": cfg.get("dataset") or "x"})
    return PreparedReading(params, delimiter or params.delimiter, delimiter or ",")


def compare_tables(
    original: str | Path,
    synthetic: str | Path,
    *,
    reporting_length: int = 3,
    resolution: int = 10,
    config: str | Path | None = None,
    delimiter: str | None = None,
) -> dict[str, Any]:
    """Utility of ``synthetic`` against ``original`` (both CSV or Parquet files).

    Args:
        original: the sensitive table.
        synthetic: the synthetic table (e.g. a release's ``synthetic.csv``).
        reporting_length: longest combination / marginal compared.
        resolution: k of the preservation metrics.
        config: a release TOML config; its ``use_columns``, ``sensitive_zeros``,
            ``record_limit``, ``delimiter`` and declared bins apply to ``original`` (bins and
            the record limit not to ``synthetic``, whose cells are already bin labels).
        delimiter: CSV delimiter of both files (default: the config's for ``original``, ``,``).

    Returns:
        ``{"differentially_private": False, "note", "params", "records", "aggregates",
        "marginal_fidelity"}``.

    Raises:
        SdsInputError: a file cannot be read, columns differ, or a parameter is invalid.
    """
    from sds_core.evaluation.metrics import NOT_DP_NOTE, aggregate_metrics, marginal_fidelity
    from sds_core.marginals.exact_counts import exact_aggregates

    how = reading(config, original, delimiter)
    sensitive, prep = how.prepare_original(original)
    synth = how.prepare_synthetic(synthetic, prep)
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "params": {
            "reporting_length": reporting_length,
            "resolution": resolution,
            "config": None if config is None else str(config),
        },
        "records": {"original": sensitive.n_records, "synthetic": synth.n_records},
        "aggregates": aggregate_metrics(
            exact_aggregates(sensitive, reporting_length),
            exact_aggregates(synth, reporting_length),
            resolution=resolution,
            n_sensitive=sensitive.n_records,
            n_target=synth.n_records,
        ),
        "marginal_fidelity": marginal_fidelity(sensitive, synth, max_order=reporting_length),
    }


def summary_lines(result: dict[str, Any]) -> list[str]:
    """A short human-readable summary of :func:`compare_tables`' result."""
    agg, fid = result["aggregates"], result["marginal_fidelity"]
    lines = [
        "NOT differentially private: computed from the sensitive data; keep it with the "
        "data owner.",
        f"records: original {result['records']['original']}, synthetic "
        f"{result['records']['synthetic']} "
        f"(expansion {agg['record_expansion_pct']:+.2f}%)",
        "length  suppressed%  fabricated%  mean error  (combinations of the original)",
    ]
    for k, row in sorted(agg["by_length"].items()):
        lines.append(
            f"{k:>6}  {row['suppressed_pct']:>11.2f}  {row['fabricated_pct']:>11.2f}  "
            f"{row['mean_error']:>10.2f}"
        )
    lines.append(
        f"overall: suppressed {agg['suppressed_pct']:.2f}%, fabricated "
        f"{agg['fabricated_pct']:.2f}%, mean error {agg['mean_error']:.2f}, mean "
        f"proportional error {agg['mean_proportional_error']:.4f}"
    )
    for order, tvd in sorted(fid["tvd_mean_by_order"].items()):
        lines.append(
            f"mean total variation distance of {order}-way marginals: {tvd:.4f} "
            f"(max {fid['tvd_max_by_order'][order]:.4f})"
        )
    return lines
