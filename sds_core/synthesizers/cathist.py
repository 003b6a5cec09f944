"""The ``cathist`` synthesizer: one CatHist histogram per column over its declared domain.

Rodriguez & Howe, Algorithm 1, applied column by column (sequential composition over columns),
plus a DP record count; columns are sampled independently like ``histogram-1way``. Pure ε-DP
and no data-derived domain: values outside the declared domains are never released.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import EMPTY_CODE, DeclaredDomain, Domain
from sds_core.data.table import PreparedTable
from sds_core.dp import noise
from sds_core.dp.declared import (
    cathist_histogram,
    cathist_tau,
    cathist_threshold,
    undeclared_values,
)
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.synthesizers.base import (
    FitResult,
    SynthesizerSpend,
    check_epsilon,
    check_n,
    check_proportion,
    dp_record_count,
    laplace_tv_per_draw,
    pure_spend,
    register,
    resolve_columns,
    sample_cells,
)


def _as_declared(item: DeclaredDomain | Mapping[str, object]) -> DeclaredDomain:
    if isinstance(item, DeclaredDomain):
        return item
    if isinstance(item, Mapping):
        opts = dict(item)
        if isinstance(opts.get("values"), list):
            opts["values"] = tuple(opts["values"])  # type: ignore[arg-type]
        try:
            return DeclaredDomain(**opts)  # type: ignore[arg-type]
        except TypeError as e:
            raise SdsInputError(f"bad declared domain {item!r}: {e}") from e
    raise SdsInputError(f"declared domains must be DeclaredDomain or mappings, got {item!r}")


@dataclass(frozen=True, slots=True, eq=False)
class CatHistModel:
    """DP model: the released domain, per column the noisy count of each released label
    (code order) and of the empty value (0 if it did not pass), and the DP record count."""

    domain: Domain
    counts: tuple[NDArray[np.int64], ...]
    empty_counts: tuple[int, ...]
    dp_count: int

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form (all DP quantities)."""
        return {
            "dp_count": self.dp_count,
            "histograms": {
                col: {
                    "labels": list(labs),
                    "counts": cnt.tolist(),
                    "empty": empty,
                }
                for col, labs, cnt, empty in zip(
                    self.domain.columns,
                    self.domain.labels,
                    self.counts,
                    self.empty_counts,
                    strict=True,
                )
            },
        }


@register
@dataclass(slots=True)
class CatHist:
    """Per-column CatHist histograms over declared domains, sampled independently.

    Args:
        declared: one :class:`DeclaredDomain` (or a mapping of its fields) per column to
            synthesize; these columns are the output columns, in table order.
        rho: tolerance: probability that NO value outside the data appears in a column
            (higher rho => higher threshold tau => fewer random values but rarer real ones lost).
        number_of_records_epsilon_proportion: ε share of the DP record count.
    """

    name: ClassVar[str] = "cathist"

    declared: tuple[DeclaredDomain, ...] = ()
    rho: float = 0.5
    number_of_records_epsilon_proportion: float = 0.05
    _model: CatHistModel | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.declared, DeclaredDomain | Mapping) or not isinstance(
            self.declared, Sequence
        ):
            raise SdsInputError("declared must be a list of declared domains, one per column")
        self.declared = tuple(_as_declared(d) for d in self.declared)
        if not self.declared:
            raise SdsInputError(
                "cathist needs declared=[DeclaredDomain(column, values=..., size=...), ...] for "
                "every column to synthesize"
            )
        names = [d.column for d in self.declared]
        if len(set(names)) != len(names):
            raise SdsInputError(f"declared domains repeat a column: {names}")
        check_proportion(self.rho, "rho")
        check_proportion(
            self.number_of_records_epsilon_proportion, "number_of_records_epsilon_proportion"
        )

    def _shares(self, epsilon: float) -> tuple[float, float]:
        epsilon = check_epsilon(epsilon)
        eps_count = epsilon * self.number_of_records_epsilon_proportion
        return eps_count, (epsilon - eps_count) / len(self.declared)

    def budget(self, epsilon: float, delta: float | None) -> tuple[SynthesizerSpend, ...]:
        """Count ε·p_N; each column (1-p_N)·ε/d (sequential over columns); pure ε-DP, δ = 0."""
        eps_count, eps_col = self._shares(epsilon)
        spends = [pure_spend(f"{self.name}/count", "discrete-laplace", eps_count)]
        spends += [
            pure_spend(f"{self.name}/histogram/{d.column}", "cathist-discrete-laplace", eps_col)
            for d in self.declared
        ]
        return tuple(spends)

    def fit(
        self,
        table: PreparedTable,
        *,
        epsilon: float,
        delta: float | None,
        rnd: ReleaseRandomness,
        release_label: str,
    ) -> FitResult:
        """Run CatHist on every declared column (undeclared data values: private note only)."""
        spends = self.budget(epsilon, delta)
        eps_count, eps_col = self._shares(epsilon)
        dom = table.domain
        cols = resolve_columns(dom, [d.column for d in self.declared])
        by_name = {d.column: d for d in self.declared}
        st = spends[0].stage
        dp_count = dp_record_count(
            table.n_records, eps_count, rnd=rnd, label=f"{release_label}/{st}", stage=st
        )
        labels_out, counts_out, empties, notes = [], [], [], {}
        report_cols: dict[str, object] = {}
        for j in cols:
            col = dom.columns[j]
            dec, stage = by_name[col], f"{self.name}/histogram/{col}"
            label = f"{release_label}/{stage}"
            exact = np.bincount(table.codes[:, j] + 1, minlength=dom.cardinalities[j] + 1)
            idx = dec.index_of(dom.labels[j])
            ok = idx >= 0
            if not ok.all():
                bad = undeclared_values(dec, dom.labels[j])
                notes[col] = {"undeclared_values": bad[:20], "n_undeclared_values": len(bad)}
            hist = cathist_histogram(
                dec,
                idx[ok],
                exact[1:][ok].astype(np.int64),
                epsilon=eps_col,
                rho=self.rho,
                rnd=rnd,
                label=label,
                stage=stage,
            )
            # the empty value is one more (always declared) bin of the same histogram
            z = noise.discrete_laplace(
                rnd, f"{label}/empty", scale=1 / eps_col, size=1, stage=stage
            )
            empty = int(exact[0] + z[0])
            empties.append(empty if empty >= hist.threshold else 0)
            order = sorted(range(len(hist.labels)), key=lambda i: hist.labels[i])
            labels_out.append(tuple(hist.labels[i] for i in order))
            counts_out.append(hist.counts[order])
            notes.setdefault(col, {})["n_random_values"] = hist.n_random
            report_cols[col] = {
                "domain_size": dec.total_size,
                "tau_paper": cathist_tau(dec.total_size, self.rho, eps_col),
                "threshold": cathist_threshold(dec.total_size, self.rho, eps_col),
            }
        domain = Domain(tuple(dom.columns[j] for j in cols), tuple(labels_out))
        self._model = CatHistModel(domain, tuple(counts_out), tuple(empties), dp_count)
        report = {
            "synthesizer": self.name,
            "guarantee": f"({epsilon:g}, 0)-DP, add/remove-one-record neighbours, over the "
            "declared domains",
            "mechanisms": [s.mechanism for s in spends],
            "rho": self.rho,
            "columns": report_cols,
            "noise_tv_per_draw": {s.stage: laplace_tv_per_draw(s.epsilon) for s in spends},
            "randomness": "which/how many declared-but-unseen values pass and their counts: "
            "Binomial/Geometric draws from a PCG64 generator seeded by "
            "SHAKE-256(release key, label)",
        }
        return FitResult(spends, self._model, report, notes)

    def sample(self, n: int | None, *, rng: np.random.Generator) -> PreparedTable:
        """Columns sampled independently ∝ clipped noisy counts (empty included).

        ``n=None`` samples the DP record count.
        """
        if self._model is None:
            raise SdsInputError(f"{self.name}: call fit() before sample()")
        model = self._model
        n = check_n(n, model.dp_count)
        codes = np.full((n, model.domain.n_columns), EMPTY_CODE, dtype=np.int32)
        for j, (cnt, empty) in enumerate(zip(model.counts, model.empty_counts, strict=True)):
            w = np.concatenate([np.clip(cnt, 0, None), [max(empty, 0)]]).astype(np.float64)
            cell = sample_cells(w, n, rng=rng)
            codes[:, j] = np.where((cell >= 0) & (cell < cnt.size), cell, EMPTY_CODE)
        return PreparedTable(model.domain, codes)


def expected_random_values(n: int, rho: float, epsilon: float) -> float:
    """Expected number of values outside the data that pass: about -ln(rho) for large n."""
    return n * math.exp(-epsilon * cathist_threshold(n, rho, epsilon)) / (1 + math.exp(-epsilon))
