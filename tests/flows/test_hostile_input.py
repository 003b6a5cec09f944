"""Hostile ids, homes, configs and files: a clear error or a documented safe behaviour,
nothing charged and nothing half-written."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from sds_core.errors import SdsInputError
from sds_release.store.inputs import ingest
from sds_release.store.workspace.encoding import csv_bytes, neutralize_formulas
from sds_release.store.workspace.home import resolve_home
from tests.helpers import charges, complete_releases, run_cli

ESCAPES = ["../x", "..", "/etc", "a/../../b", "a\0b", "x" * 200, " lead", "a b", "~root"]


@pytest.mark.parametrize("bad", ESCAPES)
def test_ids_that_escape_the_home_are_refused(bad: str, tiny_csv: Path, tmp_path: Path) -> None:
    """Dataset and release ids with separators, '..', NUL or 200 characters: exit 2 naming the
    id rule, for every command, with nothing created outside (or inside) the home."""
    home = tmp_path / "home"
    home.mkdir()
    commands = [
        ["release", str(tiny_csv), "--dataset", bad],
        ["release", str(tiny_csv), "--dataset", "ok", "--release-id", bad],
        ["resume", bad],
        ["cancel", bad],
        ["budget", "set", bad, "--epsilon", "1"],
        ["audit", bad],
    ]
    for args in commands:
        code, _, err = run_cli(*args, "--home", str(home))
        assert code == 2, (args, err)
        assert "not valid" in err or "should match pattern" in err, (args, err)
    assert sorted(p.name for p in home.iterdir()) == []  # not even a ledger
    assert not (tmp_path / "x").exists() and not Path("/etc/ledger.sqlite").exists()


def test_symlinked_home_is_followed(tmp_path: Path) -> None:
    """A --home that is a symlink resolves to its target, which must pass the same checks."""
    target = tmp_path / "real-home"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    assert resolve_home(link) == target
    code, _, err = run_cli("budget", "set", "d", "--epsilon", "1", "--home", str(link))
    assert code == 0, err
    assert (target / "ledger.sqlite").is_file()


def test_world_writable_home_is_refused(tmp_path: Path) -> None:
    """A home anyone can write to is refused (its private files could be swapped)."""
    home = tmp_path / "open"
    home.mkdir()
    os.chmod(home, 0o777)
    code, _, err = run_cli("budget", "set", "d", "--epsilon", "1", "--home", str(home))
    assert code == 2 and "writable by every user" in err and "chmod o-w" in err
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("which", ["config", "input"])
def test_a_config_or_input_in_a_folder_others_can_write_is_refused(
    which: str, tiny_csv: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """Issue #37: whoever can write a folder on the config's or the input's path can swap
    them; `sds release` refuses, naming the folder and the chmod, before any budget exists."""
    shared = tmp_path / "shared"
    shared.mkdir()
    config, data = tiny_config, tiny_csv
    if which == "config":
        config = shared / "tiny.toml"
        config.write_text(tiny_config.read_text())
    else:
        data = shared / "tiny.csv"
        data.write_bytes(tiny_csv.read_bytes())
    shared.chmod(0o770)
    home = tmp_path / "home"
    code, _, err = run_cli(
        "release", str(data), "--config", str(config), "--home", str(home), "--quiet"
    )
    assert code == 2, err
    assert f"the folder {shared} on the path of the {which}" in err
    assert f"chmod g-w {shared}" in err and err.count("sds: error:") == 1
    assert not (home / "ledger.sqlite").exists() and complete_releases(home) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_home_of_another_user_is_refused(tmp_path: Path) -> None:
    """A home owned by another user is refused, naming the shared-ledger alternative."""
    home = tmp_path / "theirs"
    home.mkdir()
    os.chown(home, 65534, 65534)
    with pytest.raises(SdsInputError, match=r"belongs to another user.*PostgreSQL ledger"):
        resolve_home(home)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("epsilon = 2.0", "epsilon = 2.0\ncolour = 'blue'", "parameter 'colour': Extra inputs"),
        ("epsilon = 2.0", "epsilon = 'lots'", "parameter 'epsilon'"),
        ("reporting_length = 2", "reporting_length = 2.5", "parameter 'reporting_length'"),
        ("min_rows = 10", "min_rows = 10\nmaxrows = 5", "parameter 'table_schema.maxrows'"),
        ('name = "sex"', 'name = "sex"\nvalue = ["0"]', "table_schema.columns.0.value"),
    ],
)
def test_config_unknown_keys_and_wrong_types(
    old: str, new: str, expected: str, tiny_csv: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """Unknown keys (a typo too) and wrong types in the config: exit 2 naming the key,
    nothing created."""
    text = tiny_config.read_text()
    assert old in text
    config = tmp_path / "bad.toml"
    config.write_text(text.replace(old, new, 1))
    home = tmp_path / "home"
    code, _, err = run_cli("release", str(tiny_csv), "--config", str(config), "--home", str(home))
    assert code == 2 and expected in err, err
    assert not home.exists()


def test_formula_cells_are_neutralized_in_csv_only() -> None:
    """Cells a spreadsheet would run (= + - @ tab CR) get a leading apostrophe; numbers stay."""
    frame = pd.DataFrame({"=cmd": ["=HYPERLINK(x)", "+1", "-5", "@SUM(A1)", "\tx", "plain"]})
    safe, changed = neutralize_formulas(frame)
    assert changed == 4  # the header, and =..., @..., tab (+1 and -5 are numbers)
    rows = list(csv.reader(io.StringIO(csv_bytes(safe).decode())))
    assert rows[0] == ["'=cmd"]
    assert [r[0] for r in rows[1:]] == ["'=HYPERLINK(x)", "+1", "-5", "'@SUM(A1)", "'\tx", "plain"]
    plain = pd.DataFrame({"a": ["1", "x"]})
    assert neutralize_formulas(plain)[1] == 0 and neutralize_formulas(plain)[0] is plain


def _release(path: Path, config: Path, home: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli("release", str(path), "--config", str(config), "--home", str(home), "--quiet",
                   *extra)  # fmt: skip


@pytest.mark.slow
def test_formula_injection_end_to_end(tmp_path: Path, prefect_server: str) -> None:
    """A declared value '=2+5' is released as '=2+5' in synthetic.parquet and as \"'=2+5\" in
    synthetic.csv; the manifest lists both files' hashes (documented in docs/privacy.md)."""
    cells = [f"{'=2+5' if i % 2 else '@me'},{'a' if i % 3 else 'b'}" for i in range(200)]
    rows = ["kind,grp", *cells]
    data = tmp_path / "f.csv"
    data.write_text("\n".join(rows) + "\n")
    config = tmp_path / "f.toml"
    config.write_text(
        'dataset = "formula"\nepsilon = 4.0\nreporting_length = 2\n'
        "[budget]\nepsilon = 10.0\ndelta = 1e-3\n"
        '[schema]\nmin_rows = 10\nmax_rows = 1000\n[[schema.columns]]\nname = "kind"\n'
        'values = ["=2+5", "@me"]\n[[schema.columns]]\nname = "grp"\nvalues = ["a", "b"]\n'
    )
    code, out, err = _release(
        data, config, tmp_path / "home", "--seed", "4", "--release-id", "formula"
    )
    assert code == 0, err
    rel = Path(out.strip().splitlines()[-1])
    parquet = set(pq.read_table(rel / "synthetic.parquet").column("kind").to_pylist())
    text = set(r[0] for r in csv.reader(io.StringIO((rel / "synthetic.csv").read_text())))
    # SDS records may leave a cell empty (""): nothing to neutralize there
    values = parquet - {""}
    assert values <= {"=2+5", "@me"} and values
    assert text - {"kind", ""} == {f"'{v}" for v in values}


@pytest.mark.slow
def test_file_growing_while_read_is_refused(
    tiny_csv: Path, tiny_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    prefect_server: str,
) -> None:  # fmt: skip
    """A file appended to while ingest reads it: clear error, nothing charged, no release."""
    data = tmp_path / "growing.csv"
    data.write_bytes(tiny_csv.read_bytes())
    real = ingest._check_line_lengths

    def writer_appends(p: Path) -> None:
        real(p)
        with open(p, "a") as f:
            f.write("1,30,9,1,less 10k\n")

    monkeypatch.setattr(ingest, "_check_line_lengths", writer_appends)
    home = tmp_path / "home"
    code, _, err = _release(data, tiny_config, home)
    assert code == 1 and "changed while it was read" in err and "stable file" in err
    assert charges(home) == [] and complete_releases(home) == []


@pytest.mark.slow
def test_ten_gigabyte_line_is_refused_without_loading_it(
    tiny_config: Path, tmp_path: Path, prefect_server: str
) -> None:
    """A 10 GiB line (a sparse file: no disk used) is refused after reading 64 MiB of it."""
    data = tmp_path / "huge.csv"
    with open(data, "wb") as f:
        f.write(b"sex,age,educ,married,inc_cat\n")
        f.truncate(10 * 2**30)
    home = tmp_path / "home"
    code, _, err = _release(data, tiny_config, home)
    assert code == 1 and "line 2 is longer than 64 MiB" in err
    assert charges(home) == [] and complete_releases(home) == []


def test_line_length_check_counts_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The streaming check names the first line over the limit and accepts lines at it."""
    monkeypatch.setattr(ingest, "MAX_LINE_BYTES", 10)
    monkeypatch.setattr(ingest, "_CHUNK", 4)
    ok = tmp_path / "ok.csv"
    ok.write_bytes(b"a,b\n" + b"0123456789\n" * 3)
    ingest._check_line_lengths(ok)
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"a,b\n1,2\n" + b"x" * 11 + b"\n")
    with pytest.raises(SdsInputError, match="line 3 is longer than"):
        ingest._check_line_lengths(bad)
