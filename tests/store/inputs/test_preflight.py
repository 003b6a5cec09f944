"""Pre-flight: bad inputs and parameters are refused before Prefect or GX load, charging nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config import build_params, load_config
from sds_release.store.config.fields import SYNTHESIZERS
from sds_release.store.inputs.preflight import check_budget, preflight, zero_warning
from tests.flows.test_bad_input import CASES, _case_file
from tests.helpers import PROJECT, charges, complete_releases, run_cli

# One child process runs every case in turn (typer's CliRunner) and prints, per case, the exit
# code, what the command wrote to stderr and which of the modules were loaded after it; a closed
# port as API: a flow run would fail differently. A module loaded by one case stays loaded for
# the next ones, so a case is never checked more leniently than in a process of its own.
_PROBE = """
import json, sys
from typer.testing import CliRunner
from sds_release.flows.cli import app
out = {}
for case, args in json.loads(sys.argv[1]).items():
    result = CliRunner().invoke(app, args)
    loaded = [m for m in ("prefect", "great_expectations", "pandas", "numba") if m in sys.modules]
    out[case] = [result.exit_code, result.stderr, loaded]
print(json.dumps(out))
"""


def _in_one_process(cases: dict[str, list[str]]) -> dict[str, tuple[int, str, set[str]]]:
    """``{case: (exit code, stderr, modules loaded after it)}`` of the ``sds`` commands
    ``cases``, run in turn by one child process."""
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(cases)],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    return {c: (code, err, set(loaded)) for c, (code, err, loaded) in results.items()}


@pytest.fixture(scope="module")
def refused(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, tiny_config: Path
) -> dict[str, tuple[tuple[int, str, set[str]], Path]]:
    """Every case of test_bad_input released from one child process: ``{case: ((exit code,
    stderr, modules loaded after it), its home)}``."""
    root = tmp_path_factory.mktemp("preflight")
    cases, homes = {}, {}
    for case in sorted(CASES):
        folder = root / case
        folder.mkdir()
        homes[case] = folder / "home"
        path = _case_file(case, folder, tiny_csv)
        cases[case] = ["release", path, "--config", str(tiny_config)]
        cases[case] += ["--home", str(homes[case]), "--quiet"]
    return {c: (r, homes[c]) for c, r in _in_one_process(cases).items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_refused_before_prefect_and_gx(
    case: str, refused: dict[str, tuple[tuple[int, str, set[str]], Path]]
) -> None:
    """Every bad file of test_bad_input: the same message, from a process that never loaded
    Prefect, GX or numba (pandas: pyarrow imports it); nothing reserved, charged or published."""
    (code, err, loaded), home = refused[case]
    problem, fix = CASES[case]
    assert code != 0 and problem in err and fix in err, err
    assert err.count("sds: error:") == 1 and "Traceback" not in err
    assert loaded <= {"pandas"}, loaded
    assert charges(home) == [] and complete_releases(home) == []
    assert not (home / "private").exists()  # no release was even started


BAD_PARAMETERS = [
    (["--epsilon", "0"], 2, "parameter 'epsilon'"),
    (["--synthesizer", "gan"], 2, "unknown synthesizer 'gan'"),
    (["--use-columns", "sex,zip"], 1, "parameter 'use_columns' names column 'zip'"),
    (["--sensitive-zeros", "nope"], 1, "parameter 'sensitive_zeros' names column 'nope'"),
    (["--epsilon", "50"], 1, "needs (epsilon=50.0"),
]


@pytest.fixture(scope="module")
def refused_parameters(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path
) -> dict[str, tuple[tuple[int, str, set[str]], Path]]:
    """Each of BAD_PARAMETERS released (dataset d, a budget of ε 10) from one child process."""
    root = tmp_path_factory.mktemp("parameters")
    cases, homes = {}, {}
    for i, (args, _, _) in enumerate(BAD_PARAMETERS):
        homes[str(i)] = home = root / str(i) / "home"
        assert run_cli("budget", "set", "d", "--epsilon", "10", "--home", str(home))[0] == 0
        cases[str(i)] = ["release", str(tiny_csv), "--dataset", "d", "--home", str(home), *args]
    return {c: (r, homes[c]) for c, r in _in_one_process(cases).items()}


@pytest.mark.parametrize("case", range(len(BAD_PARAMETERS)))
def test_bad_parameters_refused_before_prefect(
    case: int, refused_parameters: dict[str, tuple[tuple[int, str, set[str]], Path]]
) -> None:
    """Parameter mistakes (values, synthesizer, column names, budget) are refused by a process
    that never loads Prefect, GX or numba; nothing is charged."""
    (code, err, loaded), home = refused_parameters[str(case)]
    _, status, expected = BAD_PARAMETERS[case]
    assert code == status and expected in err, err
    assert loaded <= {"pandas"}, loaded
    assert charges(home) == []


def test_zeros_of_columns_left_out_are_not_checked(tmp_path: Path, tiny_csv: Path) -> None:
    """A config's sensitive_zeros may name columns this release leaves out (use_columns):
    preparation ignores them, so the pre-flight does too; inside use_columns they must exist."""
    params = build_params(
        {},
        {
            "input": str(tiny_csv),
            "dataset": "d",
            "home": str(tmp_path),
            "default_budget": {"epsilon": 10.0},
            "use_columns": ["sex", "age"],
            "sensitive_zeros": ["sex", "latino"],
        },
    )
    assert set(preflight(params).zero_shares) == set()  # sex kept, age has no "0"
    wrong = params.model_copy(update={"use_columns": ["sex", "latino"]})
    with pytest.raises(SdsInputError, match="parameter 'use_columns' names column 'latino'"):
        preflight(wrong)


def test_budget_is_checked_before_the_data_is_read(tmp_path: Path, tiny_config: Path) -> None:
    """An unaffordable release is refused with the ledger's words, even for a missing-free
    input that would fail later: the budget comes first (release contract)."""
    from sds_release.store.ledger.book import Ledger

    home = tmp_path / "home"
    Ledger.open(home).set_budget("tiny", epsilon=1.0, delta=1e-3)
    params = build_params(
        load_config(tiny_config),
        {"input": str(tmp_path / "never-read.csv"), "home": str(home), "release_id": "r1"},
    )
    with pytest.raises(SdsInputError, match=r"needs \(epsilon=2.0.*only \(epsilon=1.0"):
        check_budget(params)
    assert charges(home) == [] and Ledger.open(home).reservation("r1") is None


def test_budget_check_reads_the_release_ledger_url(
    ledger_url: str, tmp_path: Path, tiny_config: Path
) -> None:
    """The pre-flight reads the ledger the release names (SQLite or PostgreSQL), not the home's
    file, and writes nothing: no reservation, no charge, no ledger file created in the home."""
    from sds_release.store.ledger.book import Ledger

    home = tmp_path / "home"
    home.mkdir()
    ledger = Ledger.from_url(ledger_url)
    ledger.set_budget("tiny", epsilon=1.0, delta=1e-3)
    before = ledger.rows()
    params = build_params(
        load_config(tiny_config),
        {
            "input": str(tmp_path / "never-read.csv"),
            "home": str(home),
            "release_id": "r1",
            "ledger": ledger_url,
        },
    )
    with pytest.raises(SdsInputError, match=r"needs \(epsilon=2.0.*only \(epsilon=1.0"):
        check_budget(params)
    ledger.set_budget("tiny", epsilon=3.0, delta=1e-3)
    check_budget(params)  # affordable now: passes
    assert len(ledger.rows()) == len(before) + 1  # only the second set_budget
    assert ledger.reservation("r1") is None and not (home / "ledger.sqlite").exists()


def test_zero_warning_names_columns_shares_and_the_fix(tiny_csv: Path) -> None:
    """Without sensitive_zeros the 0/1 columns are named with their share and the option."""
    params = build_params(
        {}, {"input": str(tiny_csv), "dataset": "d", "default_budget": {"epsilon": 10.0}}
    )
    found = preflight(params.model_copy(update={"home": str(Path(tiny_csv).parent / "h")}))
    assert set(found.zero_shares) == {"sex", "married"}
    text = zero_warning(found.zero_shares)
    assert "sex (" in text and "married (" in text and "% of rows" in text
    assert "--sensitive-zeros sex,married" in text and "--sensitive-zeros all" in text
    kept = params.model_copy(update={"sensitive_zeros": ["all"], "home": params.home})
    assert preflight(kept).zero_shares == {}


def test_zero_warning_printed_once_by_the_cli(
    tmp_path: Path, tiny_csv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's pre-flight prints the warning once on stderr; --sensitive-zeros all silences it."""
    from sds_release.flows.local.launch import preflight_checks as _preflight

    params = build_params(
        {},
        {
            "input": str(tiny_csv),
            "dataset": "d",
            "default_budget": {"epsilon": 10.0},
            "home": str(tmp_path),
            "release_id": "r1",
        },
    )
    _preflight(params)
    err = capsys.readouterr().err
    assert err.count("sds: warning:") == 1 and "sex" in err and "married" in err
    _preflight(params.model_copy(update={"sensitive_zeros": ["all"]}))
    assert capsys.readouterr().err == ""


def test_synthesizer_names_match_the_registry() -> None:
    """The names parameters accept without importing the registry are the registry's names."""
    from sds_core.synthesizers import available

    assert set(SYNTHESIZERS) == {"aggregate-seeded", *available()}


def test_zero_warning_stays_out_of_the_flow_log(
    tmp_path: Path,
    tiny_csv: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The prepare task logs nothing of the "0" cells (counted from the data: not DP, and the
    run's log is what UI users read); their exact shares go to the private state, which the
    custodian report shows."""
    import logging

    import sds_release.tasks.preparation as preparation
    from sds_release.store.executor.local import LocalExecutor
    from sds_release.store.inputs.ingest import read_table
    from sds_release.store.run.release_run import ReleaseRun, SensitiveTable

    logger = logging.getLogger("sds-test-flow-log")
    logger.addHandler(caplog.handler)  # Prefect's logging setup may stop propagation
    monkeypatch.setattr(preparation, "task_logger", lambda: logger)
    params = build_params({}, {"input": str(tiny_csv), "dataset": "d", "home": str(tmp_path)})
    run = ReleaseRun(params, "r1", str(tmp_path))
    run.dirs.paths.create(exist_ok=True)
    with caplog.at_level(logging.DEBUG, logger=logger.name):
        preparation.prepare_table.fn(
            run=run,
            table=SensitiveTable(read_table(tiny_csv)),
            input_sha256="x",
            executor=LocalExecutor(),
        )
    logger.removeHandler(caplog.handler)
    logged = [r.getMessage() for r in caplog.records if r.name == logger.name]
    assert logged and not [m for m in logged if '"0"' in m or "of rows" in m], logged
    assert set(run.dirs.state()["zero_shares"]) == {"sex", "married"}


def test_columns_named_like_the_aggregate_table_are_refused(tmp_path: Path) -> None:
    """aggregates.parquet has its own length/combination/count columns next to one column per
    released input column: an input column of the same name is refused before any work, and
    passes when use_columns leaves it out."""
    data = tmp_path / "t.csv"
    data.write_text("a,count\n" + "".join(f"{i % 3},{i % 5}\n" for i in range(50)))
    base = {"input": str(data), "dataset": "d", "home": str(tmp_path),
            "default_budget": {"epsilon": 10.0}}  # fmt: skip
    with pytest.raises(SdsInputError, match=r"input column\(s\) \['count'\].*rename"):
        preflight(build_params({}, base))
    preflight(build_params({}, {**base, "use_columns": ["a"]}))


def test_subject_rows_that_disagree_on_a_dp_binned_column_are_refused(tmp_path: Path) -> None:
    """With DP quantile bins and a subject id, a subject whose rows hold two ages is refused by
    the pre-flight, naming the column, before anything is reserved; without DP bins the join
    refuses it in the prepare stage, still before any charge, so the pre-flight leaves it."""
    data = tmp_path / "people.csv"
    rows = [f"p{i},{20 + i % 40},{i % 2}" for i in range(200)] + ["p3,71,1"]
    data.write_text("pid,age,sex\n" + "\n".join(rows) + "\n")
    age = {"name": "age", "type": "integer", "min": 0, "max": 120}
    values = {
        "input": str(data),
        "dataset": "people",
        "home": str(tmp_path / "home"),
        "default_budget": {"epsilon": 10.0, "delta": 1e-3},
        "use_columns": ["age", "sex"],
        "subject_id": "pid",
    }
    binned = [age | {"bins": {"dp_quantiles": 4}}, {"name": "sex"}]
    values["table_schema"] = {"columns": binned, "allow_extra_columns": True}
    with pytest.raises(SdsInputError, match=r"different values in column\(s\) age; in age"):
        preflight(build_params({}, values))
    assert charges(tmp_path / "home") == []
    plain = {"columns": [age, {"name": "sex"}], "allow_extra_columns": True}
    preflight(build_params({}, values | {"table_schema": plain}))
