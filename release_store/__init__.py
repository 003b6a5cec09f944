"""The release store: everything a release keeps outside the DP core, without Prefect.

``params`` (the ``ReleaseParams`` model and config files), ``ledger`` (+ ``ledger_chain``,
``ledger_types``: the privacy-budget ledger), ``workspace`` (``$SDS_HOME`` layout, manifests),
``workdir`` (a release's key, checkpoints and state), ``stages`` (the stage registry),
``ingest`` (reading inputs), ``validation`` (the Great Expectations gate), ``audit``,
``progress`` and ``compare``. It imports neither ``tasks`` nor ``flows``.
"""
