"""The release store: everything a release keeps outside the DP core, without Prefect.

One package per concept, in the order they may import each other (tests/test_import_graph.py):

- ``workspace``: the home on disk (layout and ids, atomic writes, manifests, integrity, artifact
  bytes);
- ``ledger``: the privacy-budget ledger (budgets and policies, reservations, charges, the hash
  chain, backends, the dashboard);
- ``config``: a release's parameters (ReleaseParams, config files, the declared schema, the
  conversion to ``sds_core`` objects);
- ``inputs``: the sensitive input before any charge (reading, pre-flight, schema checks, the GX
  gate) and ``sds plan``;
- ``run``: one running release (ReleaseRun, the stage registry, the private workdir, resume,
  stage logs, progress);
- ``executor``: where a release's data work runs, chosen once per release (the interface, the
  local executor);
- ``cluster``: the Dask executor;
- ``report``: report.html and explorer.html, from published values only;
- ``publish``: the publish stage's files;
- ``audit``: audits after the fact (the home's audit, replay, signatures, the run journal and
  the audit page);
- ``series``: a dataset's DP counts across its periods (``sds series``), from published files;
- ``compare``: ``sds evaluate`` outside a release (NOT DP).

It imports neither ``tasks`` nor ``flows``; this module imports nothing.
"""
