"""The SDS DP marginals engine (spec §1.3-§1.8), stage by stage.

``engine``: protect the record count, plan the budget, aggregate each length k, finalize;
``params`` its parameters; ``aggregates`` the published ``AggregateSet``; ``privacy_report``
what the ledger records. The rest are its parts: ``combinations``, ``contributions`` (bounding),
``normalization``, ``declared_tuples`` (the 1-tuple step over declared domains),
``exact_counts`` (never released) and the compiled kernels ``_kernels`` / ``_count_kernels``,
which ``warmup`` loads into a process before its first release.
"""
