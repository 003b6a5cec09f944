"""`sds release postgresql://... --table T | --query Q` on the session's PostgreSQL server: the
same release as from the rows as CSV, the replay from the table, and the refusals."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pytest

from sds_release.store.inputs.postgres import read_postgres
from tests.helpers import COLUMNS, charges, complete_releases, run_cli
from tests.pgserver import PgServer

TABLE_SQL = "CREATE TABLE {name} (sex text, age integer, educ text, married text, inc_cat text)"


def _load(url: str, name: str, rows: list[list[str]]) -> None:
    """Table ``name`` holding ``rows`` (age as an integer column, the rest as text)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(TABLE_SQL.format(name=name))
        with conn.cursor().copy(f"COPY {name} ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as f:
        return [[r[c] for c in COLUMNS] for r in csv.DictReader(f)]


@pytest.fixture
def people(pg_server: PgServer, tiny_csv: Path) -> str:
    """URL of a new database whose table ``people`` holds the rows of ``tiny_csv``."""
    url = pg_server.create_database("input")
    _load(url, "people", _rows(tiny_csv))
    return url


def test_rows_in_one_order_whatever_the_storage(people: str, tiny_csv: Path) -> None:
    """A table, the same rows stored in reverse and a SELECT of them read to the same ordered
    Arrow table and digest; one more row changes the digest."""
    _load(people, "reversed", _rows(tiny_csv)[::-1])
    table, digest = read_postgres(people, table="people", query=None)
    again, digest2 = read_postgres(people, table="Reversed", query=None)  # unquoted: lower case
    picked, digest3 = read_postgres(
        people, table=None, query="SELECT sex, age, educ, married, inc_cat FROM people"
    )
    assert digest == digest2 == digest3 and table.equals(again) and table.equals(picked)
    assert table.num_rows == len(_rows(tiny_csv)) and table.schema.field("age").type == pa.int32()
    assert table.schema.metadata is None and table.schema.field("sex").metadata is None
    import psycopg

    with psycopg.connect(people, autocommit=True) as conn:
        conn.execute("INSERT INTO reversed VALUES ('1', 40, '9', '1', 'less 10k')")
    assert read_postgres(people, table="reversed", query=None)[1] != digest


@pytest.mark.slow
def test_table_release_equals_csv_release_and_replays(
    people: str, tiny_csv: Path, tiny_config: Path, tmp_path: Path, prefect_server: str
) -> None:
    """Same seed and release id: the release of the table has the CSV release's aggregates
    bytes; `sds audit --replay --input URL` proves it, and after an INSERT says it changed."""
    common = ["--config", str(tiny_config), "--seed", "3", "--release-id", "pg-1", "--quiet"]
    from_csv, from_pg = tmp_path / "csv-home", tmp_path / "pg-home"
    code, _, err = run_cli("release", str(tiny_csv), *common, "--home", str(from_csv))
    assert code == 0, err
    code, out, err = run_cli(
        "release", people, "--table", "people", *common, "--home", str(from_pg)
    )
    assert code == 0, err
    [csv_dir], [pg_dir] = complete_releases(from_csv), complete_releases(from_pg)
    assert out.strip().splitlines()[-1] == str(pg_dir)
    for name in ("aggregates.parquet", "aggregates.tsv"):
        assert (pg_dir / name).read_bytes() == (csv_dir / name).read_bytes(), name
    manifest = json.loads((pg_dir / "manifest.json").read_text())
    assert manifest["input"]["name"] == f"{people}&table=people"
    assert manifest["parameters"]["input"] == people and manifest["parameters"]["table"] == "people"

    replay = ["audit", "pg-1", "--replay", "--input", people, "--home", str(from_pg), "--json"]
    code, out, err = run_cli(*replay)
    assert code == 0, err + out
    assert json.loads(out)["identical"]
    import psycopg

    with psycopg.connect(people, autocommit=True) as conn:
        conn.execute("INSERT INTO people VALUES ('1', 40, '9', '1', 'less 10k')")
    code, out, err = run_cli(*replay)
    assert code != 0 and "table changed since the release" in err, err + out


def test_refusals_charge_nothing(people: str, tiny_config: Path, home: Path) -> None:
    """Unknown table, a query that writes, an unreachable server, a password in the URL, the
    Dask executor, --table with --query, --table on a file: one paragraph naming the fix,
    exit 1, nothing charged or written, and the table unchanged."""
    args = ["--config", str(tiny_config), "--home", str(home), "--quiet"]
    socket_dir = people.split("host=", 1)[1]
    cases = [
        ([people, "--table", "nobody"], "table 'nobody' does not exist"),
        (
            [people, "--query", "INSERT INTO people VALUES ('1', 1, '1', '1', 'x') RETURNING *"],
            "the query writes to the database",
        ),
        (
            [people, "--query", "DELETE FROM people RETURNING *"],
            "the query writes to the database",
        ),
        (
            ["postgresql://sds@/nowhere?host=/nonexistent-sds-dir", "--table", "people"],
            "cannot connect to the input database",
        ),
        (
            [f"postgresql://sds:s3cret@/x?host={socket_dir}", "--table", "people"],
            "keep it in PGPASSWORD or ~/.pgpass",
        ),
        ([people, "--table", "people", "--executor", "dask"], "--executor local"),
        ([people, "--table", "people", "--query", "SELECT 1"], "pass exactly one"),
        ([people], "neither --table nor --query"),
        ([str(home / "in.csv"), "--table", "people"], "the input is a file"),
    ]
    for given, expected in cases:
        code, _, err = run_cli("release", *given, *args)
        text = " ".join(err.split())
        assert code != 0 and expected in text, (given, err)
        assert "s3cret" not in err
    assert charges(home) == [] and not list(home.glob("releases/*/*"))
    import psycopg

    with psycopg.connect(people) as conn:
        assert conn.execute("SELECT count(*) FROM people").fetchone() == (400,)
