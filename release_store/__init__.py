"""The release store: everything a release keeps outside the DP core, without Prefect.

``params`` (the ``ReleaseParams`` model and config files), ``ledger`` (+ ``ledger_chain``,
``ledger_types``: the privacy-budget ledger), ``workspace`` (``$SDS_HOME`` layout, manifests),
``workdir`` (a release's key, checkpoints and state), ``run`` (the running release and its
noise description), ``stages`` (the stage registry and timeline), ``ingest`` (reading inputs),
``preflight`` (the checks the CLI runs before Prefect or GX load), ``schema_checks`` (the
schema's checks, in Arrow), ``validation`` (the Great Expectations gate; ``gx_suite`` runs its
suite, in a worker process when one runs), ``publishing`` (the artifacts, report and manifest;
``artifact_encoding`` turns tables into bytes; ``report``, ``explorer``, ``report_inputs``,
``charts``), ``replay``, ``signing``, ``audit``, ``progress`` and ``compare``. It imports neither
``tasks`` nor ``flows``.
"""
