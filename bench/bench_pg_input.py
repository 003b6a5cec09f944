"""Reading a PostgreSQL table into Arrow: adbc-driver-postgresql against psycopg 3, 1M rows.

Starts a throwaway PostgreSQL server (``tests/pgserver.py``), loads the PUMS example resampled
with replacement (fixed seed, as ``bench/bench_release.py``) into a table with typed columns
(integers, ``income`` double precision, ``inc_cat`` text), then reads the whole table into one
Arrow table, each way in a fresh subprocess (so the peak RSS is that read's own):

* ``adbc``: ``adbc_driver_postgresql.dbapi`` cursor, ``fetch_record_batch()`` (binary COPY,
  Arrow batches from the driver);
* ``psycopg-copy``: psycopg 3 ``COPY (SELECT ...) TO STDOUT (FORMAT csv)`` collected in
  memory, then parsed by ``pyarrow.csv.read_csv`` (column types as the table's);
* ``psycopg-rows``: psycopg 3 ``fetchmany`` into Python tuples, then ``pa.array`` per column.

Usage (from the project root)::

    python bench/bench_pg_input.py [--rows 1000000] [--repeat 3] [--ways adbc,psycopg-copy]

Prints one line per read: wall seconds, peak RSS (MiB) of the reading process and its rows.
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

COLUMNS = (
    "state integer, puma integer, sex integer, age integer, educ integer, "
    "income double precision, latino integer, black integer, asian integer, married integer, "
    "inc_cat text"
)
WAYS = ("adbc", "psycopg-copy", "psycopg-rows")


def read(way: str, url: str) -> dict[str, Any]:
    """Read table ``pums`` into one Arrow table ``way``; wall time, peak RSS, rows."""
    import pyarrow as pa

    t0 = time.perf_counter()
    if way == "adbc":
        import adbc_driver_postgresql.dbapi as adbc

        with adbc.connect(url) as conn, conn.cursor() as cur:
            cur.execute("SELECT * FROM pums")
            reader = cur.fetch_record_batch()
            table = pa.Table.from_batches(list(reader), schema=reader.schema)
    elif way == "psycopg-copy":
        import psycopg
        import pyarrow.csv as pacsv

        with psycopg.connect(url) as conn, conn.cursor() as cur:
            names = [
                r[0]
                for r in cur.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = 'pums' ORDER BY ordinal_position"
                )
            ]
            with cur.copy("COPY (SELECT * FROM pums) TO STDOUT (FORMAT csv)") as copy:
                data = io.BytesIO()
                for chunk in copy:
                    data.write(chunk)
            types = dict.fromkeys(names, pa.int32()) | {
                "income": pa.float64(),
                "inc_cat": pa.string(),
            }
            data.seek(0)
            table = pacsv.read_csv(
                data,
                read_options=pacsv.ReadOptions(column_names=names),
                convert_options=pacsv.ConvertOptions(column_types=types),
            )
    else:
        import psycopg

        with psycopg.connect(url) as conn, conn.cursor() as cur:
            cur.execute("SELECT * FROM pums")
            names = [d.name for d in cur.description or ()]
            columns: list[list[Any]] = [[] for _ in names]
            while rows := cur.fetchmany(50_000):
                for col, values in zip(columns, zip(*rows, strict=True), strict=True):
                    col.extend(values)
            table = pa.table({n: pa.array(c) for n, c in zip(names, columns, strict=True)})
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"way": way, "seconds": round(seconds, 2), "peak_mib": round(peak), "rows": len(table)}


def load(url: str, rows: int, data_dir: Path) -> None:
    """Table ``pums``: the example resampled to ``rows`` rows (bench_release's file)."""
    import psycopg
    from bench_release import resampled

    path = resampled(rows, data_dir)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE pums ({COLUMNS})")
        with conn.cursor().copy("COPY pums FROM STDIN (FORMAT csv, HEADER true)") as copy:
            with path.open("rb") as f:
                while block := f.read(1 << 20):
                    copy.write(block)
        conn.execute("VACUUM ANALYZE pums")


def main() -> None:
    """Start a server, load the table, time every way ``--repeat`` times."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ways", default=",".join(WAYS))
    ap.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "sds-bench")
    ap.add_argument("--read", nargs=2, help=argparse.SUPPRESS)  # the child: WAY URL
    args = ap.parse_args()
    if args.read:
        print(json.dumps(read(*args.read)))
        return
    from pgserver import PgServer, ensure_installed

    server = PgServer(ensure_installed())
    try:
        url = server.create_database("bench")
        t0 = time.perf_counter()
        load(url, args.rows, args.data_dir)
        print(f"loaded {args.rows} rows in {time.perf_counter() - t0:.1f} s", flush=True)
        for _ in range(args.repeat):
            for way in args.ways.split(","):
                done = subprocess.run(
                    [sys.executable, __file__, "--read", way, url],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                print(done.stdout.strip(), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
