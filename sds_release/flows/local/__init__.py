"""Running releases on this machine: the home's Prefect server, its warm release runner, and
``sds deploy``'s deployments.

- ``launch``: one release from the command line: Prefect's environment, the home's server
  (started if none answers), the hand-off to the warm runner, else the flow run in this process;
- ``server``: the home's Prefect server: start, stop, status, its credential and record;
- ``supervisor``: the process that runs and watches the server and the warm runner
  (``python -m sds_release.flows.local.supervisor``);
- ``webapp``: the application the server runs: Prefect's, behind a Content Security Policy;
- ``template``: the Prefect database template a new home's server starts from;
- ``handoff``: the client side of the warm runner: ``SDS_RUNNER``, its socket, the hand-off of a
  release (standard library only: ``sds release`` imports it before Prefect);
- ``runner``: the warm release runner (Linux): Prefect, GX and the flow imported once, one forked
  child per release (``python -m sds_release.flows.local.runner``);
- ``deploy``: the locked process work pool, the pin files and the deployments of ``sds deploy``.

"Runner" here is always the home's warm release runner (not Prefect's ``Runner`` of
``flow.serve``); Prefect's workers (which run deployed releases) and Dask's workers keep their
own names. This package imports nothing: the modules
are imported by name (several run as ``python -m``, and ``handoff`` must stay light).
"""
