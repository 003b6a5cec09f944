"""The ledger's table layout: the SQL that creates its tables, indexes, triggers and view.

One layout, written for each backend (:mod:`sds_release.store.ledger.backends` runs it when it opens
an empty database): the ``ledger`` table of chained rows, ``meta`` (schema version and chain
head) and the ``charges`` view of the release contract. Column meanings: docs/ledger.md.
"""

from __future__ import annotations

__all__ = ["POSTGRES_SCHEMA", "SCHEMA_VERSION", "SQLITE_SCHEMA"]

SCHEMA_VERSION = "1"
"""The layout's version, kept in ``meta``; a store refuses a database of any other."""


def _tables(seq_type: str) -> str:
    """The ``meta`` and ``ledger`` tables and the ledger's unique indexes (one charge per stage,
    one reservation and one close per release), the same in both dialects but ``seq``'s type."""
    return f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (
  seq {seq_type} PRIMARY KEY, kind TEXT NOT NULL, dataset TEXT NOT NULL, release_id TEXT,
  stage TEXT, mechanism TEXT, epsilon TEXT NOT NULL, delta TEXT NOT NULL, rho TEXT,
  created_at TEXT NOT NULL, flow_run_id TEXT, detail TEXT, prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS one_charge_per_stage ON ledger(release_id, stage)
  WHERE kind = 'charge';
CREATE UNIQUE INDEX IF NOT EXISTS one_reservation_per_release ON ledger(release_id)
  WHERE kind = 'reserve';
CREATE UNIQUE INDEX IF NOT EXISTS one_close_per_release ON ledger(release_id)
  WHERE kind = 'close';
"""


SQLITE_SCHEMA = (
    _tables("INTEGER")
    + """CREATE TRIGGER IF NOT EXISTS ledger_no_update BEFORE UPDATE ON ledger
  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS ledger_no_delete BEFORE DELETE ON ledger
  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
CREATE VIEW IF NOT EXISTS charges AS
  SELECT seq, dataset, release_id, stage, mechanism, epsilon, delta, rho, created_at,
         flow_run_id, prev_hash, hash FROM ledger WHERE kind = 'charge';
INSERT OR IGNORE INTO meta VALUES ('schema_version', '1');
INSERT OR IGNORE INTO meta VALUES ('head_seq', '0');
INSERT OR IGNORE INTO meta VALUES
  ('head_hash', '0000000000000000000000000000000000000000000000000000000000000000');
"""
)

POSTGRES_SCHEMA = (
    _tables("BIGINT")
    + """CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'the ledger is append-only'; END $$;
CREATE OR REPLACE TRIGGER ledger_no_update BEFORE UPDATE OR DELETE ON ledger
  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE OR REPLACE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE OR REPLACE VIEW charges AS
  SELECT seq, dataset, release_id, stage, mechanism, epsilon, delta, rho, created_at,
         flow_run_id, prev_hash, hash FROM ledger WHERE kind = 'charge';
INSERT INTO meta VALUES ('schema_version', '1') ON CONFLICT DO NOTHING;
INSERT INTO meta VALUES ('head_seq', '0') ON CONFLICT DO NOTHING;
INSERT INTO meta VALUES
  ('head_hash', '0000000000000000000000000000000000000000000000000000000000000000')
  ON CONFLICT DO NOTHING;
"""
)
