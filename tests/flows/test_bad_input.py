"""Bad input: clear message, non-zero exit, nothing charged, no complete-looking release."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import charges, complete_releases, run_cli


def _write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _lines(tiny_csv: Path) -> list[str]:
    return tiny_csv.read_text().splitlines()


def _case_file(case: str, tmp_path: Path, tiny_csv: Path) -> str:
    rows = _lines(tiny_csv)
    body = "\n".join(rows) + "\n"
    if case == "missing":
        return str(tmp_path / "nope.csv")
    if case == "empty":
        return _write(tmp_path, "empty.csv", b"")
    if case == "header-only":
        return _write(tmp_path, "header.csv", (rows[0] + "\n").encode())
    if case == "wrong-delimiter":
        return _write(tmp_path, "semi.csv", body.replace(",", ";").encode())
    if case == "duplicate-columns":
        return _write(tmp_path, "dup.csv", body.replace("educ", "age", 1).encode())
    if case == "column-not-in-schema":
        return _write(
            tmp_path,
            "extra.csv",
            ("\n".join([rows[0] + ",zip"] + [r + ",90210" for r in rows[1:]]) + "\n").encode(),
        )
    if case == "not-utf8":
        return _write(tmp_path, "latin.csv", (body + "1,30,9,1,caf\xe9\n").encode("latin-1"))
    if case == "ragged":
        return _write(tmp_path, "ragged.csv", (body + "1,30,9\n").encode())
    if case == "outside-domain":
        return _write(tmp_path, "domain.csv", (body + "1,30,9,1,a million\n").encode())
    if case == "schema-column-not-in-file":
        return _write(
            tmp_path, "fewer.csv", ("\n".join(r.rsplit(",", 1)[0] for r in rows) + "\n").encode()
        )
    raise AssertionError(case)


FIX_SCHEMA = "Fix the data or the declared schema in the config"
CASES = {  # case: (the problem, named with file/column/row, and the fix)
    "missing": ("nope.csv' does not exist", "check the path"),
    "empty": ("empty.csv' is empty", "it needs a header row and at least one data row"),
    "header-only": ("header.csv' has a header row but no data rows", "give a file with data"),
    "wrong-delimiter": ("the file looks ';'-delimited", "pass --delimiter ';'"),
    "duplicate-columns": ("duplicate column names ['age']", "rename them"),
    "column-not-in-schema": (
        "input column(s) ['zip'] are not in the schema",
        "declare them or drop them with use_columns",
    ),
    "schema-column-not-in-file": (
        "declared column(s) ['inc_cat'] are missing from the input",
        FIX_SCHEMA,
    ),
    "not-utf8": (
        "latin.csv' is not valid UTF-8: undecodable byte at line 402",
        "re-save the file as UTF-8",
    ),
    "ragged": ("data row 401 (line 402) has 3 fields but the header has 5", "fix that row"),
    "outside-domain": (
        "column 'inc_cat': values must be one of the 10 declared values (first "
        "failing data row 401)",
        FIX_SCHEMA,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_file_is_refused_without_charge(
    case: str, tmp_path: Path, tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    """Each broken input file fails clearly, charges nothing and leaves no complete release."""
    path = _case_file(case, tmp_path, tiny_csv)
    code, _out, err = run_cli(
        "release", path, "--config", str(tiny_config), "--home", str(home), "--quiet"
    )
    problem, fix = CASES[case]
    assert code != 0
    assert problem in err and fix in err
    assert err.count("sds: error:") == 1 and "Traceback" not in err
    assert charges(home) == []
    assert complete_releases(home) == []
    if case == "missing":  # refused before any budget is reserved
        assert not (home / "ledger.sqlite").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--epsilon", "0"], "parameter 'epsilon': Input should be greater than 0"),
        (["--epsilon", "-1"], "parameter 'epsilon'"),
        (["--synthesizer", "gan"], "unknown synthesizer 'gan'"),
        (["--delta", "2"], "parameter 'delta'"),
        (
            ["--executor", "local", "--dask-address", "tcp://127.0.0.1:9"],
            "names a Dask scheduler, but executor is 'local', which counts in this process",
        ),
    ],
)
def test_bad_parameters_fail_before_anything(
    args: list[str], expected: str, tiny_csv: Path, tiny_config: Path, home: Path
) -> None:
    """Invalid parameters are refused with the parameter's name, before any ledger exists."""
    code, _, err = run_cli(
        "release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home), *args
    )
    assert code == 2
    assert expected in err
    assert not (home / "ledger.sqlite").exists()


def test_non_numeric_epsilon(tiny_csv: Path, tiny_config: Path, home: Path) -> None:
    """A non-numeric --epsilon is a usage error naming the option."""
    code, _, err = run_cli(
        "release",
        str(tiny_csv),
        "--config",
        str(tiny_config),
        "--home",
        str(home),
        "--epsilon",
        "lots",
    )
    assert code == 2
    assert "--epsilon" in err
    assert charges(home) == []


def test_home_not_writable(tiny_csv: Path, tiny_config: Path, tmp_path: Path) -> None:
    """A --home that cannot be created is named in the error."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run_cli(
        "release", str(tiny_csv), "--config", str(tiny_config), "--home", str(blocker / "home")
    )
    assert code == 2
    assert "not a writable directory" in err


def test_zero_budget_left(
    tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    """A dataset whose budget cannot pay the release is refused before the data is read."""
    assert run_cli("budget", "set", "tiny", "--epsilon", "1", "--home", str(home))[0] == 0
    code, _, err = run_cli(
        "release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home), "--quiet"
    )
    assert code == 1
    assert "needs (epsilon=2.0" in err and "only (epsilon=1.0" in err
    assert charges(home) == []
    assert not (home / "releases").exists() or complete_releases(home) == []


def test_exactly_zero_budget_left(
    tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    """A dataset whose lifetime budget is fully spent refuses the next release, naming it."""
    from sds_release.store.ledger.book import Ledger
    from sds_release.store.ledger.values import PlannedCharge

    ledger = Ledger.open(home)
    ledger.set_budget("tiny", epsilon=2.0, delta=0.001)
    ledger.reserve("tiny", "earlier", [PlannedCharge("count", "laplace", 2.0)])
    ledger.charge("earlier", "count")
    ledger.complete("earlier")
    before = charges(home)
    code, _, err = run_cli(
        "release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home), "--quiet"
    )
    assert code == 1
    assert "'tiny'" in err and "only (epsilon=0" in err
    assert "sds budget set" in err  # the fix
    assert charges(home) == before
    assert complete_releases(home) == []


def test_failure_is_one_paragraph_in_a_real_process(
    tmp_path: Path, tiny_csv: Path, tiny_config: Path, prefect_server: str
) -> None:
    """Run as a program, a failing release prints exactly one stderr paragraph (no tracebacks)."""
    import os
    import subprocess
    import sys

    from tests.helpers import PROJECT

    bad = _case_file("outside-domain", tmp_path, tiny_csv)
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    env.pop("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sds_release.flows.cli",
            "release",
            bad,
            "--config",
            str(tiny_config),
            "--home",
            str(tmp_path / "home"),
        ],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("sds: error: release "), done.stderr[-3000:]
    assert FIX_SCHEMA in lines[0]


def test_existing_release_id(
    tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    """Re-using the id of a complete release is refused and charges nothing more."""
    args = [
        "release",
        str(tiny_csv),
        "--config",
        str(tiny_config),
        "--home",
        str(home),
        "--release-id",
        "r1",
        "--seed",
        "3",
        "--quiet",
    ]
    code, out, _ = run_cli(*args)
    assert code == 0, out
    before = charges(home)
    code, _, err = run_cli(*args)
    assert code == 1
    assert "already exists" in err
    assert charges(home) == before


def test_release_id_of_a_failed_release(
    tmp_path: Path, tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    """Re-using the id of a release that failed in the flow (and was cancelled) is refused,
    naming the fix; an id the pre-flight refused was never reserved and stays free."""
    from sds_release.flows.release import release as release_flow
    from sds_release.store.config import build_params, load_config

    bad = _case_file("outside-domain", tmp_path, tiny_csv)
    args = ["--config", str(tiny_config), "--home", str(home), "--quiet"]
    assert run_cli("release", bad, *args, "--release-id", "r8")[0] == 1  # pre-flight refusal
    assert run_cli("release", str(tiny_csv), *args, "--release-id", "r8", "--seed", "1")[0] == 0
    params = build_params(  # a deployment run has no pre-flight: the flow's gate refuses it
        load_config(tiny_config), {"input": bad, "home": str(home), "release_id": "r9"}
    )
    assert release_flow(params, return_state=True).is_failed()
    before = charges(home)
    code, _, err = run_cli("release", str(tiny_csv), *args, "--release-id", "r9")
    assert code == 1
    assert "release id 'r9' was already used by a release that failed" in err
    assert "leave out --release-id" in err
    assert charges(home) == before and len(complete_releases(home)) == 1
