"""The package as a custodian installs it: the wheel in a fresh virtual environment outside the
repository (dependencies from the package registry), `sds deploy` there, a worker from that
environment, a run triggered through the API, the release complete."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sds_release.store.ledger.book import Ledger
from tests.e2e.prefect_processes import prefect_server, run_logs, wait_final, worker
from tests.helpers import PROJECT

pytestmark = [pytest.mark.server, pytest.mark.slow]


SOURCES = ("pyproject.toml", "README.md", "LICENSE", "sds_core", "sds_release")


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the repository with the wheel built from a copy of the sources
    (no stale build/ of the checkout) installed from the registry; returns its bin/."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = PROJECT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    _run(sys.executable, "-m", "pip", "wheel", src, "--no-deps", "-w", root / "dist", cwd=root)
    (wheel,) = (root / "dist").glob("sds_release-*.whl")
    _run(sys.executable, "-m", "venv", root / "venv", cwd=root)
    # --no-compile: the same files installed, without byte-compiling every module of every
    # dependency up front (about half of the install's CPU); what the release imports is
    # compiled as it is imported
    _run(root / "venv" / "bin" / "pip", "install", "--quiet", "--no-compile", wheel, cwd=root)
    return root / "venv" / "bin"


def test_installed_package_deploys_and_a_worker_releases(
    venv: Path, tmp_path: Path, tiny_csv: Path, tiny_config: Path
) -> None:
    """From the installed wheel, outside the repository, in a folder with its own `flows/` and
    `tasks/` packages: `sds --version`, `sds budget set`, `sds deploy`, a worker of that
    environment; an on-demand run with ε = 2 and an `sds release` complete, each charged."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    where = tmp_path / "custodian"
    where.mkdir()
    (tmp_path / "prefect").mkdir()
    home = where / "home"
    # the custodian's project folder has packages of its own named as Prefect projects name
    # theirs (flows/, tasks/): they shadow nothing of ours (sds_release is the one package)
    for own in ("flows", "tasks", "release_store"):
        (where / own).mkdir()
        (where / own / "__init__.py").write_text(f"raise ImportError('the user's own {own}')\n")
    installed = _run(
        venv / "python", "-c", "import sds_release; print(sds_release.__file__)", cwd=where
    )
    assert installed.startswith(str(venv.parent)) and "site-packages" in installed
    version = _run(venv / "sds", "--version", cwd=where)
    assert version == _run(venv / "python", "-m", "sds_release", "--version", cwd=where)
    assert version.startswith("sds-release ")
    with prefect_server(sys.executable, tmp_path / "prefect") as server_env:
        env = {k: v for k, v in server_env.items() if k != "PYTHONPATH"}
        env["PATH"] = f"{venv}{os.pathsep}{env['PATH']}"
        _run(venv / "sds", "budget", "set", "tiny", "--epsilon", "10", "--delta", "1e-3",
             "--home", home, cwd=where, env=env)  # fmt: skip
        out = _run(venv / "sds", "deploy", "--home", home, "--input", tiny_csv,
                   "--config", tiny_config, "--pool", "sds-wheel", cwd=where, env=env)  # fmt: skip
        start = out.splitlines()[-1].removeprefix("start a worker: ")
        assert start == f"PREFECT_API_URL={env['PREFECT_API_URL']} prefect worker start " \
            "--pool sds-wheel"  # fmt: skip
        with (
            worker([str(venv / "prefect")], "sds-wheel", env, where),
            temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}),
            get_client(sync_client=True) as client,
        ):
            pool = client.read_work_pool("sds-wheel")
            command = pool.base_job_template["job_configuration"]["command"]
            assert command.startswith(f"{venv}/python") and command.endswith(" -m prefect.engine")
            dep = client.read_deployment_by_name("sds-release/on-demand-tiny")
            assert (
                dep.entrypoint == "sds_release.flows.deployed.deployed_release"
                and not dep.pull_steps
            )
            run = client.create_flow_run_from_deployment(
                dep.id, parameters={"options": {"epsilon": 2.0}}
            )
            run = wait_final(client, run.id, timeout=900)
            assert run.state.is_completed(), (run.state, run_logs(client, run.id)[-3000:])
        # and a release from the command line in that folder
        _run(venv / "sds", "release", tiny_csv, "--config", tiny_config, "--home", home,
             "--epsilon", "2", "--quiet", cwd=where, env=env)  # fmt: skip
    manifests = sorted(home.glob("releases/tiny/*/manifest.json"))
    assert len(manifests) == 2
    assert all('"status": "complete"' in m.read_text() for m in manifests)
    budget = Ledger.open(home).budget("tiny")
    assert budget is not None and budget.epsilon_spent == pytest.approx(4.0)
