"""sds-release: differentially private data releases you can audit (the product around
``sds_core``).

One import package, three layers, each importing only the ones below it
(tests/test_import_graph.py):

- ``sds_release.store``: everything a release keeps, without Prefect: parameters, ledger,
  workspace, executors, publishing, validation gate, report, audit, series;
- ``sds_release.tasks``: one Prefect task per release stage;
- ``sds_release.flows``: the flows (release, deployed, replay), ``flows.local`` (running a
  release on this machine) and ``flows.cli`` (the ``sds`` command; ``python -m sds_release``).

The DP core is the separate library ``sds_core`` (pure: arrays and frames in, values out). This
module imports nothing.
"""
