"""Release evaluation (spec §4): utility and risk metrics, marginal fidelity, agreement.

``metrics`` computes from the sensitive data (not DP, for the custodian only), with its settings
in ``params``; ``agreement`` compares the DP aggregates with the synthetic records from
published values only (what a release publishes); ``tables`` holds the per-record and
per-marginal computations.
"""
