"""Release evaluation (spec §4): utility and risk metrics, marginal fidelity, agreement.

``release`` is the release's evaluation against the sensitive data (not DP, for the custodian
only), one implementation for records in partitions and tables in this process (``records``),
with its settings in ``params``; it sums ``metrics``' comparisons and risk counts and
``cells``' marginal cells where the records are. ``agreement`` compares the DP aggregates with
the synthetic records from published values only (what a release publishes); ``tables`` holds
the per-record and per-marginal computations.
"""
