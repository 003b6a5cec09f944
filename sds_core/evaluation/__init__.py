"""Release evaluation (spec §4): utility and risk metrics, marginal fidelity, publishable subset.

``metrics`` computes from the sensitive data (not DP), with its settings in ``params``;
``publishable`` keeps the rounded ratios that may be published; ``tables`` holds the per-record
and per-marginal computations.
"""
