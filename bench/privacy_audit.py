"""Empirical privacy audit of the whole release (issue #25 point 1).

The release runs as the library runs it in memory (prepare -> DP record count -> aggregate
k = 1..R -> normalize -> synthesize; or a registry synthesizer's fit/sample) many times on two
neighbouring datasets D and D' = D + one record (or one subject), each run with a fresh release
key. A distinguishing test reads only what a release publishes (the DP aggregates as
``Col:value;...`` texts with their counts, and the synthetic records as text) and the outcome
counts become an empirical lower bound on ε (Jagielski et al. 2020, Nasr et al. 2021):

    P[E | D'] <= e^ε P[E | D] + δ   =>   ε >= ln((p1 − δ) / p0),

with p1 from below and p0 from above (two-sided Clopper–Pearson 95 % intervals, so the bound
holds with >= 95 % confidence), taken in both directions (E favouring D', its complement
favouring D). The event (which statistic, which threshold, which direction) is chosen on a
separate calibration batch of runs, so choosing it does not bias the bound.

Deliberately broken variants are injected without editing the product: a module attribute
swapped for the duration of a run (:func:`patched`) or a wrapper around one step. They must
exceed the claimed ε, or clearly separate from the correct variant.

    .venv/bin/python bench/privacy_audit.py                       # everything, fresh keys
    .venv/bin/python bench/privacy_audit.py --variants sds sds-no-threshold-1 --cases rare
    .venv/bin/python bench/privacy_audit.py --runs 400 --calibration 100 --seed 7  # quick
    .venv/bin/python bench/privacy_audit.py --list
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import stats

from sds_core.data.domain import DeclaredDomain
from sds_core.data.preparation import PrepareParams, prepare
from sds_core.data.table import PreparedTable
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.marginals import engine
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.marginals.exact_counts import exact_aggregates
from sds_core.marginals.params import DpParams
from sds_core.synthesis.generator import default_target, synthesize
from sds_core.synthesis.params import SynthesisParams
from sds_core.synthesizers import create

LABEL = "audit"
"""The release label of every run (the key is what changes between runs)."""
REPORTING_LENGTH = 3
"""R of the default release (DpParams' default); also the published aggregates' R."""
COPY_FRACTION = 0.1
"""Share of the synthetic records the ``copied-record`` bug replaces by input records."""


# ---------------------------------------------------------------------------- what is published
@dataclass(frozen=True)
class Published:
    """What one release publishes, as text: nothing else is visible to a distinguishing test.

    Args:
        aggregates: ``{"A:a;B:b": count}``, the DP aggregates (or, for a registry synthesizer
            without DP measurements, the counts of its records, as ``fit_synthesizer`` does).
        records: column -> the synthetic records' values ("" = empty).
        noise_sd: k -> σ_k·√Δ_k, the published noise scale of length k (SDS releases only).
        failed: the release failed after its DP stages (nothing to synthesize): nothing else
            is published.
    """

    aggregates: Mapping[str, int]
    records: Mapping[str, NDArray[np.object_]]
    noise_sd: Mapping[int, float] = field(default_factory=dict)
    failed: bool = False

    @classmethod
    def nothing(cls) -> Published:
        """A failed release."""
        return cls({}, {}, {}, failed=True)

    def attribute_texts(self) -> set[str]:
        """Every ``Col:value`` that appears in a published aggregate or record."""
        out = {part for combo in self.aggregates for part in combo.split(";")}
        for col, values in self.records.items():
            out.update(f"{col}:{v}" for v in set(values.tolist()) if v != "")
        return out

    def matching_records(self, target: Sequence[tuple[str, str]]) -> int:
        """Number of synthetic records that hold every (column, value) of ``target``."""
        if not self.records:
            return 0
        n = len(next(iter(self.records.values())))
        hit = np.ones(n, dtype=bool)
        for col, value in target:
            values = self.records.get(col)
            if values is None:
                return 0
            hit &= values == value
        return int(hit.sum())


def decoded(table: PreparedTable) -> dict[str, NDArray[np.object_]]:
    """The records as text, column by column ("" = empty), as a published file shows them."""
    out = {}
    for j, (col, labels) in enumerate(zip(table.domain.columns, table.domain.labels, strict=True)):
        texts = np.array([*labels, ""], dtype=object)  # code -1 (empty) -> the last entry
        out[col] = texts[table.codes[:, j]]
    return out


def combination_key(texts: Sequence[str]) -> str:
    """The published text of a combination: its ``Col:value`` parts sorted byte-wise."""
    return ";".join(sorted(texts, key=lambda s: s.encode()))


# ---------------------------------------------------------------------------- the releases
Release = Callable[[PreparedTable, "Setting", ReleaseRandomness], Published]
"""One release of a prepared table: the pipeline under audit (correct or broken)."""


@dataclass(frozen=True)
class Setting:
    """The public parameters of one audited configuration."""

    epsilon: float
    delta: float
    columns: tuple[str, ...]
    declared: tuple[DeclaredDomain, ...] = ()
    """The columns' public value lists (used by ``cathist`` only)."""
    dp_extra: Mapping[str, Any] = field(default_factory=dict)
    """Further DpParams fields of the default release (e.g. ``sensitivity_cap``)."""


def sds_release(
    table: PreparedTable,
    setting: Setting,
    rnd: ReleaseRandomness,
    *,
    declared: tuple[DeclaredDomain, ...] = (),
) -> Published:
    """The default release, stage by stage as ``sds_release/flows/release.py`` calls them.

    count -> plan -> aggregate-k (k = 1..R) -> normalize -> synthesize (``synthesis =
    "records"``, the protected count of records). A release whose aggregates hold nothing to
    synthesize fails, and then publishes nothing.
    """
    params = DpParams(
        epsilon=setting.epsilon,
        delta=setting.delta,
        reporting_length=REPORTING_LENGTH,
        declared_domains=declared,
        **dict(setting.dp_extra),
    )
    count = engine.protect_record_count(table, params, rnd, release_label=LABEL)
    plan = engine.plan_release(params, count.protected_number_of_records)
    survivors: dict[int, CombinationCounts] = {}
    noise_sd: dict[int, float] = {}
    released = None
    for k in range(1, REPORTING_LENGTH + 1):
        step = engine.aggregate_length(
            table, k, survivors, plan, params, rnd, release_label=LABEL, domain=released
        )
        if k == 1:
            released = step.domain
        survivors[k] = step.survivors
        noise_sd[k] = plan.sigma_by_len[k - 1] * math.sqrt(step.allowed_sensitivity)
    aggregates = engine.finalize(
        survivors,
        domain=released or table.domain,
        reporting_length=REPORTING_LENGTH,
        protected_number_of_records=count.protected_number_of_records,
    )
    try:
        synthetic = synthesize(
            aggregates,
            SynthesisParams(target_number_of_records=default_target(aggregates)),
            rng=rnd.generator(f"{LABEL}/synthesis"),
            multi_value_columns=table.multi_value_columns,
        )
    except SdsInputError:  # no length-1 counts survived: the release fails
        return Published.nothing()
    return Published(aggregates.to_text_dict(), decoded(synthetic), noise_sd)


def registry_release(name: str, **fixed: Any) -> Release:
    """A registry synthesizer as ``sds_release/tasks/synthesis.fit_synthesizer`` runs it.

    Options as ``sds_release.store.run.registry_synthesizer`` passes them (the columns, from the
    schema, for the histograms and dirichlet; the declared domains for cathist). Published
    aggregates: the synthesizer's DP measurements (mst, aim) or the counts of its records.
    """

    def release(table: PreparedTable, setting: Setting, rnd: ReleaseRandomness) -> Published:
        options: dict[str, Any] = dict(fixed)
        if name in ("histogram-1way", "histogram-nway", "dirichlet-multinomial"):
            options.setdefault("columns", setting.columns)
        if name == "histogram-nway":
            options.setdefault("marginal_columns", setting.columns)
        if name == "cathist":
            options["declared"] = setting.declared
        synth = create(name, **options)
        fitted = synth.fit(
            table, epsilon=setting.epsilon, delta=setting.delta, rnd=rnd, release_label=LABEL
        )
        synthetic = synth.sample(None, rng=rnd.generator(f"{LABEL}/synthesis"))
        measured = getattr(fitted.model, "aggregates", None)
        if isinstance(measured, AggregateSet) and measured.is_dp:
            aggregates = measured.to_text_dict()
        elif synthetic.n_records:
            aggregates = exact_aggregates(synthetic, REPORTING_LENGTH).to_text_dict()
        else:
            aggregates = {}
        return Published(aggregates, decoded(synthetic))

    return release


# ---------------------------------------------------------------------------- broken variants
@contextlib.contextmanager
def patched(module: ModuleType, name: str, value: object) -> Iterator[None]:
    """``module.name`` replaced by ``value`` inside the block (the product file is untouched)."""
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _no_first_threshold(sigma: float, allowed: int, delta: float) -> float:
    """Bug: the length-1 threshold removed (a noisy count > 0 is released)."""
    return -engine.DISCRETE_SHIFT


def _half_sigma_gaussian() -> Callable[..., None]:
    """Bug: the Gaussian noise of every length drawn with σ/2 (thresholds and the published σ
    unchanged)."""
    real = engine.add_discrete_gaussian  # type: ignore[attr-defined]  # the name the engine calls

    def broken(
        rnd: ReleaseRandomness, label: str, values: NDArray[np.int64], *, sigma: float, stage: str
    ) -> None:
        real(rnd, label, values, sigma=sigma / 2, stage=stage)

    return broken


def sds_with_patch(make: Callable[[], tuple[ModuleType, str, object]]) -> Release:
    """The default release with one engine function swapped for the run."""

    def release(table: PreparedTable, setting: Setting, rnd: ReleaseRandomness) -> Published:
        module, name, value = make()
        with patched(module, name, value):
            return sds_release(table, setting, rnd)

    return release


def sds_domain_from_data(
    table: PreparedTable, setting: Setting, rnd: ReleaseRandomness
) -> Published:
    """Bug: the "declared" domains are read from the data (every label of the table), outside
    any DP stage; the declared path then treats them as public."""
    declared = tuple(
        DeclaredDomain(col, values=labels)
        for col, labels in zip(table.domain.columns, table.domain.labels, strict=True)
        if labels
    )
    return sds_release(table, setting, rnd, declared=declared)


def sds_copied_record(table: PreparedTable, setting: Setting, rnd: ReleaseRandomness) -> Published:
    """Bug: a share (:data:`COPY_FRACTION`) of the synthetic records are input records."""
    out = sds_release(table, setting, rnd)
    if out.failed or not out.records:
        return out
    rng = rnd.generator(f"{LABEL}/copy")
    n = len(next(iter(out.records.values())))
    rows = rng.choice(n, size=math.ceil(COPY_FRACTION * n), replace=False)
    source = rng.integers(0, table.n_records, size=rows.size)
    inputs = decoded(table)
    records = {}
    for col, values in out.records.items():
        values = values.copy()
        values[rows] = inputs[col][source]
        records[col] = values
    return replace(out, records=records)


def histogram_public_data_domain(
    table: PreparedTable, setting: Setting, rnd: ReleaseRandomness
) -> Published:
    """Bug (configuration): ``public_domain=True`` while the table's labels came from the data."""
    return registry_release("histogram-1way", public_domain=True)(table, setting, rnd)


# ---------------------------------------------------------------------------- the cases
@dataclass(frozen=True)
class Case:
    """Two neighbouring inputs and the published statistics that could tell them apart.

    Args:
        name: short name.
        d, d_prime: the raw inputs; ``d_prime`` is ``d`` plus one record (or one subject).
        target: the added record's (column, value) pairs after preparation.
        prepare: the preparation parameters (subject ids, multi-value columns).
        kind: ``"rare"``: the target's values occur nowhere else, the statistic is whether any
            of them is published; ``"count"``: D holds many copies of the target already, the
            statistics are published counts of its combinations.
        delta: δ of the claim (None: the audit's default).
        dp_extra: further DpParams fields of the default release.
        note: what the case probes.
    """

    name: str
    d: pd.DataFrame
    d_prime: pd.DataFrame
    target: tuple[tuple[str, str], ...]
    prepare: PrepareParams = field(default_factory=PrepareParams)
    kind: str = "rare"
    delta: float | None = None
    dp_extra: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
    cost: float = 1.0
    """Relative cost of one run (the number of runs is divided by it)."""

    @property
    def event(self) -> Event | None:
        """The event fixed in advance (rare cases), or None: chosen on a calibration batch."""
        return RARE_EVENT if self.kind == "rare" else None

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns a schema would declare (the raw ones used)."""
        used = self.prepare.use_columns or tuple(self.d.columns)
        return tuple(c for c in used if c != self.prepare.subject_id)

    def declared(self) -> tuple[DeclaredDomain, ...]:
        """Public value lists: every value either input holds (cathist's declared domains)."""
        return tuple(
            DeclaredDomain(c, values=tuple(sorted(set(self.d_prime[c]) - {""})))
            for c in self.columns
        )

    def scores(self) -> dict[str, Callable[[Published], float]]:
        """The candidate statistics, each a function of the published output only."""
        texts = [f"{c}:{v}" for c, v in self.target]
        if self.kind == "rare":
            wanted = set(texts)
            return {RARE_EVENT.score: lambda p: float(bool(wanted & p.attribute_texts()))}
        subsets = {
            k: [combination_key(s) for s in itertools.combinations(texts, k)]
            for k in range(1, min(REPORTING_LENGTH, len(texts)) + 1)
        }

        def length_sum(k: int) -> Callable[[Published], float]:
            return lambda p: float(sum(p.aggregates.get(s, 0) for s in subsets[k]))

        def weighted(p: Published) -> float:  # the optimal linear test for Gaussian counts
            total = 0.0
            for k, keys in subsets.items():
                sd = p.noise_sd.get(k, 1.0) or 1.0
                total += sum(p.aggregates.get(s, 0) for s in keys) / sd**2
            return total

        out: dict[str, Callable[[Published], float]] = {
            f"sum of length-{k} counts": length_sum(k) for k in subsets
        }
        out["noise-weighted sum of counts"] = weighted
        out["records equal to the target"] = lambda p: float(p.matching_records(self.target))
        return out


def _categorical(
    rng: np.random.Generator, n: int, values: Sequence[str], p: Sequence[float]
) -> list[str]:
    return [str(v) for v in rng.choice(np.asarray(values), size=n, p=np.asarray(p))]


def rare_case(n: int = 300) -> Case:
    """D: n records over 3 columns of 2 common values; D' adds one record of 3 unique values."""
    rng = np.random.default_rng(1)
    d = pd.DataFrame({c: _categorical(rng, n, [f"{c}0", f"{c}1"], [0.75, 0.25]) for c in "ABC"})
    target = {"A": "A-rare", "B": "B-rare", "C": "C-rare"}
    return Case(
        "rare",
        d,
        pd.concat([d, pd.DataFrame([target])], ignore_index=True),
        tuple(target.items()),
        note="one record of unique values added (DP set union of the length-1 values)",
    )


def count_case(copies: int = 200, others: int = 100) -> Case:
    """D: ``copies`` records (A0, B0, C0) and ``others`` mixed ones; D' adds one more copy."""
    rng = np.random.default_rng(2)
    mixed = pd.DataFrame(
        {c: _categorical(rng, others, [f"{c}0", f"{c}1"], [0.3, 0.7]) for c in "ABC"}
    )
    target = {"A": "A0", "B": "B0", "C": "C0"}
    d = pd.concat([pd.DataFrame([target] * copies), mixed], ignore_index=True)
    return Case(
        "count",
        d,
        pd.concat([d, pd.DataFrame([target])], ignore_index=True),
        tuple(target.items()),
        kind="count",
        note="one more copy of a frequent record (the Gaussian counts' shift)",
    )


SUBJECT_PREPARE = PrepareParams(
    use_columns=("A", "C"), subject_id="id", multi_value_columns=(("C", "|"),)
)


def _subject_rows(subject: str, a: str, cs: Sequence[str]) -> list[dict[str, str]]:
    return [{"id": subject, "A": a, "C": c} for c in cs]


def subject_rare_case(n: int = 300) -> Case:
    """Subject ids: n subjects of 1-2 rows; D' adds one subject with 4 rows of unique values
    (a unique A, and 4 unique C values that become 4 binary columns C_<value>)."""
    rng = np.random.default_rng(3)
    rows = []
    for i in range(n):
        a = "a0" if rng.random() < 0.75 else "a1"
        cs = ["c0"] if rng.random() < 0.5 else ["c0", "c1"]
        rows += _subject_rows(f"s{i}", a, cs)
    d = pd.DataFrame(rows)
    added = _subject_rows("target", "a-rare", [f"r{j}" for j in range(4)])
    target = (("A", "a-rare"), *((f"C_r{j}", "1") for j in range(4)))
    return Case(
        "subject-rare",
        d,
        pd.concat([d, pd.DataFrame(added)], ignore_index=True),
        target,
        prepare=SUBJECT_PREPARE,
        note="one subject of 4 rows with unique values added (subject-level neighbours)",
    )


def subject_count_case(copies: int = 200, others: int = 100, heavy_rows: int = 20) -> Case:
    """Subject ids: ``copies`` subjects (a0; c0, c1) of 2 rows and ``others`` (a1; c0) of one;
    D' adds one more (a0; c0, c1) subject, of ``heavy_rows`` rows. Joined per subject it is one
    record like the others; counted per row it moves the counts by ``heavy_rows``."""
    data = []
    for i in range(copies):
        data += _subject_rows(f"t{i}", "a0", ["c0", "c1"])
    for i in range(others):
        data += _subject_rows(f"o{i}", "a1", ["c0"])
    d = pd.DataFrame(data)
    heavy = _subject_rows("target", "a0", ["c0", "c1"] * (heavy_rows // 2))
    return Case(
        "subject-count",
        d,
        pd.concat([d, pd.DataFrame(heavy)], ignore_index=True),
        (("A", "a0"), ("C_c0", "1"), ("C_c1", "1")),
        prepare=SUBJECT_PREPARE,
        kind="count",
        note=f"one more subject like {copies} others, with {heavy_rows} rows (the counts' shift)",
    )


WIDE_COLUMNS = tuple(f"X{j:02d}" for j in range(40))
WIDE_DELTA = 0.1


def wide_rare_case(target_values: int = 40, allowed: int = 4, n: int = 400) -> Case:
    """Issue #27 point 4: d = 40 columns, records of ``allowed`` values, Δ_1 capped at
    ``allowed`` (the public ``sensitivity_cap``); D' adds a record of ``target_values`` unique
    values.

    The length-1 candidates are taken before contribution bounding, so all of the target's
    values are noised and can pass ρ_1, which spends δ/2 over Δ_1 values only. The effect is
    on the δ scale, so the claim is audited at δ = 0.1 (the same code path; ρ_1 and σ follow
    δ), where P[a value of the target is published] can be measured against δ.
    """
    rng = np.random.default_rng(4)
    rows = []
    for _ in range(n):
        row = dict.fromkeys(WIDE_COLUMNS, "")
        for j in rng.choice(len(WIDE_COLUMNS), size=allowed, replace=False):
            row[WIDE_COLUMNS[j]] = "v0" if rng.random() < 0.8 else "v1"
        rows.append(row)
    d = pd.DataFrame(rows)
    target = {c: (f"t{j}" if j < target_values else "") for j, c in enumerate(WIDE_COLUMNS)}
    return Case(
        f"wide-rare-{target_values}" + (f"-cap{allowed}" if allowed != 4 else ""),
        d,
        pd.concat([d, pd.DataFrame([target])], ignore_index=True),
        tuple((c, v) for c, v in target.items() if v),
        prepare=PrepareParams(allow_empty_columns=True),
        delta=WIDE_DELTA,
        dp_extra={"sensitivity_cap": allowed},
        note=f"d = 40, records of {allowed} values, Δ_1 <= {allowed}, target with "
        f"{target_values} unique values, δ = {WIDE_DELTA}",
    )


def wide_release_probability(
    epsilon: float, delta: float, values: int = 40, allowed: int = 4
) -> tuple[float, float]:
    """Exact P[some value of the wide target is published at length 1 | Δ_1 = ``allowed``].

    Returns (with the candidates taken before bounding, as the engine does: ``values`` noised;
    with the candidates taken after bounding: ``allowed`` noised). Counted values survive iff
    1 + X > ρ_1, the others (count 0 after bounding) iff X > ρ_1, X ~ N_Z(0, σ_1²Δ_1) read
    from the project's own noise table. Compare with the δ/2 that ρ_1 is calibrated for.
    """
    from sds_core.synthesizers.mst import gaussian_tail

    params = DpParams(
        epsilon=epsilon, delta=delta, reporting_length=REPORTING_LENGTH, sensitivity_cap=allowed
    )
    sigma = engine.plan_release(params, 1000).sigma_by_len[0]  # δ given: m is not used
    rho = engine.first_threshold(sigma, allowed, delta) + engine.DISCRETE_SHIFT
    scale = sigma * math.sqrt(allowed)
    counted = gaussian_tail(scale, math.floor(rho - 1) + 1)
    uncounted = gaussian_tail(scale, math.floor(rho) + 1)
    after = 1 - (1 - counted) ** allowed
    before = 1 - (1 - after) * (1 - uncounted) ** (values - allowed)
    return before, after


CASES: dict[str, Callable[[], Case]] = {
    "rare": rare_case,
    "count": count_case,
    "subject-rare": subject_rare_case,
    "subject-count": subject_count_case,
    "wide-rare-40": wide_rare_case,
    "wide-rare-4": lambda: wide_rare_case(4),
    "wide-rare-40-cap1": lambda: wide_rare_case(40, allowed=1),
}


# ---------------------------------------------------------------------------- the variants
@dataclass(frozen=True)
class Variant:
    """A release under audit: correct (must stay below the claim) or broken (must not)."""

    name: str
    release: Release
    cases: tuple[str, ...]
    broken: bool = False
    cost: float = 1.0
    """Relative cost of one run: the number of runs is divided by it."""
    prepare_override: PrepareParams | None = None
    """Broken variants that prepare differently (e.g. subject ids ignored)."""
    note: str = ""


RECORD_CASES = ("rare", "count")
WIDE_CASES = ("wide-rare-40", "wide-rare-4", "wide-rare-40-cap1")
SDS_CASES = (*RECORD_CASES, "subject-rare", "subject-count", *WIDE_CASES)

VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("sds", sds_release, SDS_CASES, note="the default release"),
        Variant("histogram-1way", registry_release("histogram-1way"), RECORD_CASES),
        Variant("histogram-nway", registry_release("histogram-nway"), RECORD_CASES),
        Variant("dirichlet-multinomial", registry_release("dirichlet-multinomial"), RECORD_CASES),
        Variant("cathist", registry_release("cathist"), RECORD_CASES),
        Variant("mst", registry_release("mst"), RECORD_CASES, cost=4.0),
        Variant("aim", registry_release("aim"), RECORD_CASES, cost=20.0),
        Variant(
            "sds-no-threshold-1",
            sds_with_patch(lambda: (engine, "first_threshold", _no_first_threshold)),
            RECORD_CASES,
            broken=True,
            note="length-1 threshold removed",
        ),
        Variant(
            "sds-sigma-half",
            sds_with_patch(lambda: (engine, "add_discrete_gaussian", _half_sigma_gaussian())),
            RECORD_CASES,
            broken=True,
            note="σ halved in the Gaussian noise (thresholds unchanged)",
        ),
        Variant(
            "sds-domain-from-data",
            sds_domain_from_data,
            RECORD_CASES,
            broken=True,
            note="declared domains read from the data",
        ),
        Variant(
            "sds-copied-record",
            sds_copied_record,
            RECORD_CASES,
            broken=True,
            note=f"{COPY_FRACTION:.0%} of the synthetic records copied from the input",
        ),
        Variant(
            "histogram-data-domain",
            histogram_public_data_domain,
            ("rare",),
            broken=True,
            note="histogram-1way with public_domain=True over labels read from the data",
        ),
        Variant(
            "sds-subject-ignored",
            sds_release,
            ("subject-count",),
            broken=True,
            prepare_override=replace(SUBJECT_PREPARE, subject_id=None),
            note="rows counted as records although the claim is per subject",
        ),
    )
}


# ---------------------------------------------------------------------------- statistics
def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper–Pearson interval of a binomial proportion (k successes in n)."""
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


@dataclass(frozen=True)
class EpsilonBound:
    """ε estimated from one event: point value and the 95 % interval [lower, upper].

    ``lower`` is the audit's lower bound (0 when the data show no privacy loss).
    """

    lower: float
    point: float
    upper: float
    k1: int
    n1: int
    k0: int
    n0: int


def _log_ratio(num: float, den: float) -> float:
    if num <= 0:
        return 0.0
    if den <= 0:
        return math.inf
    return max(math.log(num / den), 0.0)


def epsilon_bound(k1: int, n1: int, k0: int, n0: int, delta: float) -> EpsilonBound:
    """ε from P[E | side 1] (k1 of n1) vs P[E | side 0] (k0 of n0): ln((p1 − δ)/p0)."""
    p1_lo, p1_hi = clopper_pearson(k1, n1)
    p0_lo, p0_hi = clopper_pearson(k0, n0)
    return EpsilonBound(
        lower=_log_ratio(p1_lo - delta, p0_hi),
        point=_log_ratio(k1 / n1 - delta, k0 / n0),
        upper=_log_ratio(p1_hi - delta, p0_lo),
        k1=k1,
        n1=n1,
        k0=k0,
        n0=n0,
    )


@dataclass(frozen=True)
class Event:
    """A distinguishing event: ``score >= threshold`` (or its complement), and which input it
    favours: the bound compares P[event | favoured] with P[event | other]."""

    score: str
    threshold: float
    complement: bool
    favours_d_prime: bool

    def describe(self) -> str:
        """Human-readable form."""
        op = "<" if self.complement else ">="
        side = "D'" if self.favours_d_prime else "D"
        return f"{self.score} {op} {self.threshold:g} (favours {side})"

    def counts(self, d: NDArray[np.float64], d_prime: NDArray[np.float64]) -> tuple[int, int]:
        """(occurrences on the favoured side, on the other side)."""
        hit_d = int(((d < self.threshold) if self.complement else (d >= self.threshold)).sum())
        hit_p = int(
            ((d_prime < self.threshold) if self.complement else (d_prime >= self.threshold)).sum()
        )
        return (hit_p, hit_d) if self.favours_d_prime else (hit_d, hit_p)


RARE_EVENT = Event("target value published", 1.0, False, True)
"""The rare cases' natural event: a value of the added record is published (favours D')."""


def candidate_events(
    scores: Sequence[str], d: NDArray[np.float64], d_prime: NDArray[np.float64]
) -> list[Event]:
    """Every event {score >= t} and complement, both directions, t over the observed values
    (at most 40 quantiles per score)."""
    out = []
    for j, name in enumerate(scores):
        values = np.unique(np.concatenate([d[:, j], d_prime[:, j]]))
        if values.size > 40:
            values = np.unique(np.quantile(values, np.linspace(0, 1, 40), method="nearest"))
        # {score >= min} is always true: start at the second value (or above the only one)
        for t in values[1:] if values.size > 1 else values + 1:
            for complement, favours in itertools.product((False, True), repeat=2):
                out.append(Event(name, float(t), complement, favours))
    return out


def choose_event(
    scores: Sequence[str], d: NDArray[np.float64], d_prime: NDArray[np.float64], delta: float
) -> Event:
    """The calibration batch's most telling event (largest lower bound, then point)."""
    best: tuple[float, float] | None = None
    chosen = Event(scores[0], 1.0, False, True)
    for event in candidate_events(scores, d, d_prime):
        j = list(scores).index(event.score)
        k1, k0 = event.counts(d[:, j], d_prime[:, j])
        b = epsilon_bound(k1, d.shape[0], k0, d.shape[0], delta)
        key = (b.lower, min(b.point, 1e9))
        if best is None or key > best:
            best, chosen = key, event
    return chosen


# ---------------------------------------------------------------------------- the audit
KeySource = Callable[[], ReleaseRandomness]


def fresh_keys() -> ReleaseRandomness:
    """A fresh 256-bit release key from the OS CSPRNG (what every release does)."""
    return ReleaseRandomness.fresh()


def seeded_keys(seed: int) -> KeySource:
    """Fresh keys per run from a seeded outer generator (deterministic tests)."""
    outer = np.random.default_rng(seed)
    return lambda: ReleaseRandomness(outer.bytes(32))


@dataclass(frozen=True)
class AuditResult:
    """One (variant, case, ε) line of the table."""

    variant: str
    case: str
    broken: bool
    epsilon: float
    delta: float
    event: str
    bound: EpsilonBound
    runs: int
    calibration_runs: int
    failed_runs: int
    seconds: float

    def row(self) -> dict[str, object]:
        """JSON-ready form."""
        b = self.bound
        return {
            "variant": self.variant,
            "case": self.case,
            "broken": self.broken,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "event": self.event,
            "epsilon_lb": b.lower,
            "epsilon_point": b.point,
            "epsilon_upper": b.upper,
            "favoured_hits": f"{b.k1}/{b.n1}",
            "other_hits": f"{b.k0}/{b.n0}",
            "runs_per_side": self.runs,
            "calibration_runs_per_side": self.calibration_runs,
            "failed_runs": self.failed_runs,
            "seconds": round(self.seconds, 1),
        }


def _prepared(case: Case, params: PrepareParams) -> tuple[PreparedTable, PreparedTable]:
    return prepare(case.d, params), prepare(case.d_prime, params)


def run_scores(
    release: Release,
    table: PreparedTable,
    setting: Setting,
    scores: Mapping[str, Callable[[Published], float]],
    runs: int,
    keys: KeySource,
) -> tuple[NDArray[np.float64], int]:
    """``runs`` releases of ``table`` (a fresh key each); the scores of each, and the failures."""
    out = np.empty((runs, len(scores)), dtype=np.float64)
    failed = 0
    fns = list(scores.values())
    for i in range(runs):
        published = release(table, setting, keys())
        failed += published.failed
        out[i] = [f(published) for f in fns]
    return out, failed


def audit(
    variant: Variant,
    case: Case,
    epsilon: float,
    *,
    runs: int,
    calibration: int,
    keys: KeySource,
    delta: float = 1e-6,
) -> AuditResult:
    """Calibrate the event on ``calibration`` runs per side, then bound ε on ``runs`` more.

    A case with an event fixed in advance (:attr:`Case.event`) skips the calibration.
    """
    event = case.event
    start = time.perf_counter()
    d, d_prime = _prepared(case, variant.prepare_override or case.prepare)
    claim_delta = case.delta if case.delta is not None else delta
    setting = Setting(epsilon, claim_delta, case.columns, case.declared(), case.dp_extra)
    scores = case.scores()
    names = list(scores)
    f0 = f1 = 0
    if event is None:
        cal_d, f0 = run_scores(variant.release, d, setting, scores, calibration, keys)
        cal_p, f1 = run_scores(variant.release, d_prime, setting, scores, calibration, keys)
        event = choose_event(names, cal_d, cal_p, claim_delta)
    else:
        calibration = 0
    out_d, f2 = run_scores(variant.release, d, setting, scores, runs, keys)
    out_p, f3 = run_scores(variant.release, d_prime, setting, scores, runs, keys)
    j = names.index(event.score)
    k1, k0 = event.counts(out_d[:, j], out_p[:, j])
    return AuditResult(
        variant.name,
        case.name,
        variant.broken,
        epsilon,
        claim_delta,
        event.describe(),
        epsilon_bound(k1, runs, k0, runs, claim_delta),
        runs,
        calibration,
        f0 + f1 + f2 + f3,
        time.perf_counter() - start,
    )


def markdown(results: Sequence[AuditResult]) -> str:
    """The docs/privacy.md table."""
    lines = [
        "| variant | case | claimed (ε, δ) | ε_lb | ε̂ [95 % interval] "
        "| event: hits favoured / other side | runs/side | failed | time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        b = r.bound
        flag = " **> claim**" if b.lower > r.epsilon else ""
        name = f"{r.variant} (broken)" if r.broken else r.variant
        lines.append(
            f"| {name} | {r.case} | ({r.epsilon:g}, {r.delta:g}) | {b.lower:.2f}{flag} | "
            f"{b.point:.2f} [{b.lower:.2f}, {b.upper:.2f}] | {r.event}: {b.k1}/{b.n1} vs "
            f"{b.k0}/{b.n0} | {r.runs} (+{r.calibration_runs}) | {r.failed_runs} | "
            f"{r.seconds:.0f} s |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: run the chosen variants × cases × ε and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 4.0])
    ap.add_argument("--delta", type=float, default=1e-6, help="δ of the claim (default 1e-6)")
    ap.add_argument("--runs", type=int, default=2000, help="audit runs per side (÷ variant cost)")
    ap.add_argument("--calibration", type=int, default=500, help="calibration runs per side")
    ap.add_argument("--seed", type=int, default=None, help="outer seed (default: fresh keys)")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    ap.add_argument("--list", action="store_true", help="list variants and cases, then exit")
    args = ap.parse_args(argv)
    if args.list:
        for v in VARIANTS.values():
            print(f"variant {v.name}: {'BROKEN ' if v.broken else ''}{v.note} cases={v.cases}")
        for name, make in CASES.items():
            print(f"case {name}: {make().note}")
        return
    keys = fresh_keys if args.seed is None else seeded_keys(args.seed)
    cases = {name: CASES[name]() for name in args.cases}
    results = []
    for v in (VARIANTS[n] for n in args.variants):
        for case in (cases[c] for c in v.cases if c in cases):
            for eps in args.epsilons:
                r = audit(
                    v,
                    case,
                    eps,
                    runs=max(int(args.runs / (v.cost * case.cost)), 50),
                    calibration=max(int(args.calibration / (v.cost * case.cost)), 20),
                    keys=keys,
                    delta=args.delta,
                )
                results.append(r)
                print(json.dumps(r.row()), flush=True)
    print(markdown(results))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([r.row() for r in results], fh, indent=1)


if __name__ == "__main__":
    main()
