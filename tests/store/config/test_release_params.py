"""ReleaseParams rules that tie two parameters together (sds_release.store.config.release_params):
a dask_address names the cluster a release counts on (issue #37)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config import build_params, load_config

BASE = {"input": "in.csv", "dataset": "d"}
ADDRESS = "tcp://10.0.0.5:8786"


def test_a_dask_address_implies_the_dask_executor(tmp_path: Path) -> None:
    """Given on the command line or in the config, a dask_address alone makes the executor
    'dask'; with executor 'dask' it stays; without it the executor stays 'local'."""
    assert build_params({}, {**BASE, "dask_address": ADDRESS}).executor == "dask"
    config = tmp_path / "c.toml"
    config.write_text(f'dataset = "d"\ndask_address = "{ADDRESS}"\n')
    assert build_params(load_config(config), {"input": "in.csv"}).executor == "dask"
    both = build_params({"executor": "dask"}, {**BASE, "dask_address": ADDRESS})
    assert both.executor == "dask" and both.dask_address == ADDRESS
    assert build_params({}, BASE).executor == "local"


@pytest.mark.parametrize(
    ("config", "overrides"),
    [
        ({}, {"executor": "local", "dask_address": ADDRESS}),
        ({"executor": "local"}, {"dask_address": ADDRESS}),
    ],
    ids=["command-line", "config-local-cli-address"],
)
def test_executor_local_with_a_dask_address_is_refused(config: dict, overrides: dict) -> None:
    """executor 'local' and a dask_address contradict each other: refused, naming both and the
    two fixes, before anything is read."""
    with pytest.raises(
        SdsInputError,
        match=r"dask_address 'tcp://10.0.0.5:8786' names a Dask scheduler, but executor is "
        r"'local'.*remove executor.*or remove dask_address",
    ):
        build_params(config, {**BASE, **overrides})
