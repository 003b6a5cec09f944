"""Publishable subset of a release evaluation (re-exported by :mod:`sds_core.evaluation.metrics`).

Evaluation compares the release with the sensitive data; this module keeps only rounded ratios
that reveal neither the true record count nor exact counts, for the release directory.
"""

from __future__ import annotations

from typing import Any

from sds_core.errors import require

PUBLISHABLE_NOTE = (
    "publishable subset of an evaluation computed from the sensitive data: NOT differentially "
    "private. Only rounded ratios are kept; no record count, no count of the sensitive data and "
    "no value whose denominator is the true record count at full precision (see "
    "sds_core.evaluation.publishable.publishable_evaluation)"
)
_RATIO_DIGITS = 3  # TVD, preservation, proportional error, synthetic shares
_PCT_DIGITS = 1  # percentages of combinations
_SENSITIVE_SHARE_DIGITS = 2  # shares whose denominator is the true record count


def _pick(d: Any, fields: dict[str, int]) -> dict[str, float]:
    """``fields`` (name -> decimals) of the dict ``d``, rounded; absent/None fields skipped."""
    if not isinstance(d, dict):
        return {}
    return {k: round(float(d[k]), n) for k, n in fields.items() if d.get(k) is not None}


def _aggregate_subset(m: Any) -> dict[str, Any]:
    pres = {
        "count_preservation": _RATIO_DIGITS,
        "mean_combo_length": 2,
        "mean_proportional_error": _RATIO_DIGITS,
    }
    pct = {"suppressed_pct": _PCT_DIGITS, "fabricated_pct": _PCT_DIGITS}
    return {
        **_pick(m, pct),
        **_pick(m, {"mean_proportional_error": _RATIO_DIGITS}),
        "by_length": {k: _pick(v, pct) for k, v in m.get("by_length", {}).items()},
        "preservation_by_length": {
            k: _pick(v, pres) for k, v in m.get("preservation_by_length", {}).items()
        },
        "preservation_by_count": {
            k: _pick(v, pres) for k, v in m.get("preservation_by_count", {}).items()
        },
    }


def publishable_evaluation(evaluation: dict[str, Any]) -> dict[str, Any]:
    """The subset of :func:`evaluate_release`'s output that may go into a release directory.

    Still computed from the sensitive data, so labelled ``differentially_private: False``;
    it reveals neither the true record count nor any exact count. Kept (rounded):

    * ``params`` (public settings);
    * ``marginal_fidelity``: mean and max TVD by order (3 decimals), the number of marginals
      by order (follows from the schema), the synthetic empty-cell shares (3 decimals; they
      follow from the published records) and the original's (denominator = true n, so only
      2 decimals: many record counts give the same value);
    * ``sensitive_vs_dp_aggregates`` / ``sensitive_vs_synthetic``: suppressed and fabricated
      combination % overall and by length (1 decimal; denominator = number of distinct
      sensitive combinations, never the record count; with the published aggregates they
      approximate that number of distinct combinations per length, at the 1-decimal
      resolution), mean proportional error, and per length / per count bin the count
      preservation, mean combination length and mean proportional error (ratios);
    * ``synthetic_risk``: unique / rare combination % and % of records holding one, overall
      and by length (computable from the published synthetic records alone).

    Withheld: the record expansion (it is n_target / n - 1), mean counts and mean absolute
    errors (exact counts), every ``n_*`` count (distinct sensitive combinations, items per
    bin), the mean synthetic count per bin, and the whole ``sensitive_risk`` (shares of
    unique / rare records of the sensitive data).

    Args:
        evaluation: the dict :func:`evaluate_release` returned (int or, after a JSON round
            trip, str keys); sections it lacks are left out.
    """
    require(isinstance(evaluation, dict), "evaluation must be the dict evaluate_release returned")
    out: dict[str, Any] = {"differentially_private": False, "note": PUBLISHABLE_NOTE}
    if isinstance(evaluation.get("params"), dict):
        out["params"] = dict(evaluation["params"])
    mf = evaluation.get("marginal_fidelity")
    if isinstance(mf, dict):
        tvd = {
            name: {k: round(float(v), _RATIO_DIGITS) for k, v in mf.get(name, {}).items()}
            for name in ("tvd_mean_by_order", "tvd_max_by_order")
        }
        shares = {"original": _SENSITIVE_SHARE_DIGITS, "synthetic": _RATIO_DIGITS}
        out["marginal_fidelity"] = {
            **tvd,
            "n_marginals_by_order": {
                k: int(v) for k, v in mf.get("n_marginals_by_order", {}).items()
            },
            "empty_cell_share": _pick(mf.get("empty_cell_share"), shares),
            "empty_share_by_column": {
                c: _pick(v, shares) for c, v in mf.get("empty_share_by_column", {}).items()
            },
        }
    for name in ("sensitive_vs_dp_aggregates", "sensitive_vs_synthetic"):
        if isinstance(evaluation.get(name), dict):
            out[name] = _aggregate_subset(evaluation[name])
    risk = evaluation.get("synthetic_risk")
    if isinstance(risk, dict):
        pct = {"unique_pct": _PCT_DIGITS, "rare_pct": _PCT_DIGITS}
        out["synthetic_risk"] = {
            **({"resolution": int(risk["resolution"])} if "resolution" in risk else {}),
            **_pick(
                risk,
                {
                    f"{w}_pct": _PCT_DIGITS
                    for w in (
                        "unique_combinations",
                        "rare_combinations",
                        "records_with_unique",
                        "records_with_rare",
                    )
                },
            ),
            "by_length": {k: _pick(v, pct) for k, v in risk.get("by_length", {}).items()},
        }
    return out
