"""`sds release` of a dataset with a config counting another privacy unit (rows instead of
subjects), found by the guarantee fuzz test (tests/flows/test_guarantee_fuzz.py): refused by the
pre-flight with nothing reserved (sds_release.store.ledger.units)."""

from __future__ import annotations

from pathlib import Path

from sds_release.store.ledger.book import Ledger
from tests.helpers import periodic_config, run_cli, write_periodic_csv


def test_sds_release_with_a_config_of_another_unit_is_refused_before_anything_is_read(
    tmp_path: Path, tiny_csv: Path, prefect_server: str
) -> None:
    """The fuzz test's reproduction: September of a dataset with a subject id, then October with
    a config that names none (``--dataset`` the same): refused by the pre-flight, nothing
    reserved; the 70 subjects with rows in both months keep ε 2 of their 3."""
    data = write_periodic_csv(
        tiny_csv,
        tmp_path / "monthly.csv",
        {"2026-09": range(0, 220), "2026-10": range(220, 440)},
        subjects={"2026-09": range(150, 370), "2026-10": range(300, 520)},
    )
    by_subject, by_row = tmp_path / "persons.toml", tmp_path / "rows.toml"
    by_subject.write_text(periodic_config(subject=True))
    by_row.write_text(periodic_config())
    home = str(tmp_path / "home")
    code, _, err = run_cli("budget", "set", "monthly", "--epsilon", "3", "--delta", "1e-3",
                           "--per-period", "--home", home)  # fmt: skip
    assert code == 0, err
    common = ["--home", home, "--seed", "3", "--epsilon", "2", "--quiet"]
    code, _, err = run_cli("release", str(data), "--config", str(by_subject), *common,
                           "--period", "2026-09", "--release-id", "sep")  # fmt: skip
    assert code == 0, err
    rows = len(Ledger.open(home).rows())
    code, _, err = run_cli("release", str(data), "--config", str(by_row), *common,
                           "--period", "2026-10", "--release-id", "oct")  # fmt: skip
    assert code == 1
    assert "dataset 'monthly' counts subjects (subject_id = 'pid')" in err
    assert "this release counts rows (no subject_id)" in err and "Nothing was read" in err
    assert len(Ledger.open(home).rows()) == rows
    assert [r.release_id for r in Ledger.open(home).reservations()] == ["sep"]
