"""The flow deployments run: a release whose run chooses only :class:`RunOptions`.

Pinned settings -> [refusal, logged in the run, before anything is read or charged] ->
the ``release`` flow's stages -> [pin file ``series = true``: the dataset's series rebuilt up
to the period released]. The input, config, dataset, ledger and the rest come from the
deployment's pin file (``$SDS_HOME/deployments/<deployment>.toml``, written by ``sds deploy``);
the home from the work pool's environment; the lifetime budget must already be in the ledger.
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect import flow, get_run_logger, runtime

from sds_core.errors import SdsInputError
from sds_release.flows.origin import run_origin
from sds_release.flows.refusals import refusals
from sds_release.flows.release import release
from sds_release.store.audit.journal import note_refused
from sds_release.store.config.deployment import (
    RunOptions,
    deployed_params,
    deployment_home,
    pin_path,
    read_pins,
    require_budget,
)
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.workspace.home import MANIFEST, private_umask
from sds_release.tasks.series import rebuild_series

__all__ = ["deployed_release"]


def _run_name() -> str:
    """``release-<deployment>``: the dataset is known only once the pin file is read."""
    return f"release-{runtime.deployment.name or 'not-deployed'}"


@flow(name="sds-release", flow_run_name=_run_name, persist_result=False, validate_parameters=True)
def deployed_release(options: RunOptions = RunOptions()) -> str:
    """Run one DP release with the deployment's pinned settings and this run's ``options``;
    returns the release directory.

    The flow is named as ``release``: the UI, the automations and the budget artifacts treat
    a deployed release as any other. A run's parameter naming a pinned field never gets here
    (the server refuses it against the schema, else the flow's parameter validation does).
    """
    log = get_run_logger()
    deployment = runtime.deployment.name
    with refusals(lambda e: log.error("refused before anything was read or charged: %s", e)):
        if not deployment:
            raise SdsInputError(
                "deployed_release runs only from a deployment (it reads the deployment's pin "
                "file); run `sds release` or the release flow instead"
            )
        home = deployment_home()
        pins = read_pins(pin_path(home, deployment))
        built = deployed_params(home, pins, options)
        with refusals(lambda e: _journal(built.params, e)):  # the audit page lists it
            require_budget(built.params)
    for note in built.notes:
        log.warning(note)
    log.info(
        "deployment %s: input, config, dataset and ledger pinned by its pin file; this run "
        "chose %s",
        deployment,
        options.given() or "nothing (the deployment's values)",
    )
    with private_umask():  # as `sds release`: what the release writes is 0600 (folders 0700)
        released = release.fn(built.params)
    if pins.series:  # the series up to the period just released, next to the releases
        dataset = str(built.params.dataset)
        period = json.loads((Path(released) / MANIFEST).read_text())["parameters"].get("period")
        try:
            with private_umask():
                rebuild_series(str(home), dataset, period)
        except Exception as e:  # the release is complete: its run stays a success
            until = f" --until {period}" if period else ""
            log.error(
                "the release is complete, but its dataset's series was not rebuilt (%s: %s); "
                "rebuild it with `sds series %s%s --home %s`",
                type(e).__name__,
                e,
                dataset,
                until,
                home,
            )
    return released


def _journal(params: ReleaseParams, error: Exception) -> None:
    """A budget refusal in the run journal (the audit page lists it)."""
    note_refused(params, run_origin(), error)
