"""Probe (issue 22, not a mode): SDS records built from only the lengths <= 2 of R = 3 aggregates.

Prints the aggregates' noise excess (``sds_core.marginals.plan.noise_excess``) and TVD1/2/3 of
the records synthesized from their 1- and 2-combinations, seed 0, for the sets named.
Such records may hold combinations of three attributes that the aggregates do not report, so
they would break the records mode's guarantee; this measures what that would buy.

    .venv/bin/python bench/probe_pairs_records.py 100k-raw-10 100k-binned-10
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_plan import DELTA, SdsRelease, aggregate, data_set, synthesize_release, tvds

from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.params import DpParams
from sds_core.marginals.plan import noise_excess


def main() -> None:
    for name in sys.argv[1:]:
        ds = data_set(name, 0)
        release = aggregate(ds.original, DpParams(epsilon=ds.epsilon, delta=DELTA), 0)
        a = release.aggregates
        pairs = AggregateSet(
            a.domain,
            2,
            {1: a.counts_of(1), 2: a.counts_of(2)},
            a.protected_number_of_records,
            is_dp=True,
        )
        table = synthesize_release(SdsRelease(pairs, release.report), "records", 0)
        tvd = " / ".join(f"{x:.4f}" for x in tvds(ds.original, table))
        print(f"{name}: noise excess {noise_excess(a):.3f}; records from the pairs: {tvd}")


if __name__ == "__main__":
    main()
