"""Bad input: clear message, non-zero exit, nothing charged, no complete-looking release."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline.conftest import charges, complete_releases, run_cli


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
        return _write(tmp_path, "extra.csv", ("\n".join(
            [rows[0] + ",zip"] + [r + ",90210" for r in rows[1:]]) + "\n").encode())
    if case == "not-utf8":
        return _write(tmp_path, "latin.csv", (body + "1,30,9,1,caf\xe9\n").encode("latin-1"))
    if case == "ragged":
        return _write(tmp_path, "ragged.csv", (body + "1,30,9\n").encode())
    if case == "outside-domain":
        return _write(tmp_path, "domain.csv", (body + "1,30,9,1,a million\n").encode())
    raise AssertionError(case)


CASES = {
    "missing": "does not exist",
    "empty": "is empty",
    "header-only": "no data rows",
    "wrong-delimiter": "--delimiter ';'",
    "duplicate-columns": "duplicate column names",
    "column-not-in-schema": "not in the schema",
    "not-utf8": "not valid UTF-8",
    "ragged": "has 3 fields but the header has 5",
    "outside-domain": "column 'inc_cat': values must be one of the 10 declared values",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_file_is_refused_without_charge(
    case: str, tmp_path: Path, tiny_csv: Path, tiny_config: Path, home: Path, prefect_server: str
) -> None:
    """Each broken input file fails clearly, charges nothing and leaves no complete release."""
    path = _case_file(case, tmp_path, tiny_csv)
    code, _out, err = run_cli("release", path, "--config", str(tiny_config), "--home", str(home),
                             "--quiet")
    assert code != 0
    assert CASES[case] in err
    assert "sds: error:" in err
    assert charges(home) == []
    assert complete_releases(home) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--epsilon", "0"], "parameter 'epsilon': Input should be greater than 0"),
        (["--epsilon", "-1"], "parameter 'epsilon'"),
        (["--synthesizer", "gan"], "unknown synthesizer 'gan'"),
        (["--delta", "2"], "parameter 'delta'"),
    ],
)
def test_bad_parameters_fail_before_anything(
    args: list[str], expected: str, tiny_csv: Path, tiny_config: Path, home: Path
) -> None:
    """Invalid parameters are refused with the parameter's name, before any ledger exists."""
    code, _, err = run_cli("release", str(tiny_csv), "--config", str(tiny_config),
                           "--home", str(home), *args)
    assert code == 2
    assert expected in err
    assert not (home / "ledger.sqlite").exists()


def test_non_numeric_epsilon(tiny_csv: Path, tiny_config: Path, home: Path) -> None:
    """A non-numeric --epsilon is a usage error naming the option."""
    code, _, err = run_cli("release", str(tiny_csv), "--config", str(tiny_config),
                           "--home", str(home), "--epsilon", "lots")
    assert code == 2
    assert "--epsilon" in err
    assert charges(home) == []


def test_home_not_writable(tiny_csv: Path, tiny_config: Path, tmp_path: Path) -> None:
    """A --home that cannot be created is named in the error."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run_cli("release", str(tiny_csv), "--config", str(tiny_config),
                           "--home", str(blocker / "home"))
    assert code == 2
    assert "not a writable directory" in err


def test_zero_budget_left(tiny_csv: Path, tiny_config: Path, home: Path,
                          prefect_server: str) -> None:
    """A dataset whose budget cannot pay the release is refused before the data is read."""
    assert run_cli("budget", "set", "tiny", "--epsilon", "1", "--home", str(home))[0] == 0
    code, _, err = run_cli("release", str(tiny_csv), "--config", str(tiny_config),
                           "--home", str(home), "--quiet")
    assert code == 1
    assert "needs (epsilon=2.0" in err and "only (epsilon=1.0" in err
    assert charges(home) == []
    assert not (home / "releases").exists() or complete_releases(home) == []


def test_existing_release_id(tiny_csv: Path, tiny_config: Path, home: Path,
                             prefect_server: str) -> None:
    """Re-using the id of a complete release is refused and charges nothing more."""
    args = ["release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home),
            "--release-id", "r1", "--seed", "3", "--quiet"]
    code, out, _ = run_cli(*args)
    assert code == 0, out
    before = charges(home)
    code, _, err = run_cli(*args)
    assert code == 1
    assert "already exists" in err
    assert charges(home) == before
