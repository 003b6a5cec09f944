"""Release workspace: home resolution, ids, layout, atomic writes, manifest, verification, audit."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import stat
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sds_core.errors import SdsInputError
from sds_release.store import workspace as ws
from sds_release.store.audit.home import audit_home
from sds_release.store.ledger.anchor import ANCHOR_FILE
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.values import PlannedCharge
from sds_release.store.run.workdir import ReleaseDirs
from sds_release.store.workspace import files


# -- home and ids ----------------------------------------------------------------------------------
def test_resolve_home_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--home wins over $SDS_HOME, which wins over ./.sds; the directory is created."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SDS_HOME", raising=False)
    assert ws.resolve_home(None) == tmp_path / ".sds" and (tmp_path / ".sds").is_dir()
    monkeypatch.setenv("SDS_HOME", str(tmp_path / "env"))
    assert ws.resolve_home(None) == tmp_path / "env"
    assert ws.resolve_home(tmp_path / "arg") == tmp_path / "arg"
    assert sorted(p.name for p in (tmp_path / "arg").iterdir()) == []  # probe file removed


def test_a_new_home_is_private_to_its_owner(tmp_path: Path) -> None:
    """A home resolve_home creates is 0700 whatever the umask: another local account can
    neither list it nor reach a file in it (before: 0755)."""
    old = os.umask(0o022)
    try:
        home = ws.resolve_home(tmp_path / "new" / "home")
    finally:
        os.umask(old)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_make_private_takes_group_and_others_access_away(tmp_path: Path) -> None:
    """make_private keeps the owner's bits and drops the rest, on the path or the whole tree;
    symlinks are left alone; it returns exactly the paths it changed."""
    root = tmp_path / "prefect"
    (root / "storage").mkdir(parents=True)
    for name, mode in (("prefect.db", 0o644), ("key", 0o600), ("storage/result", 0o444)):
        (root / name).write_text("x")
        (root / name).chmod(mode)
    root.chmod(0o755)
    (root / "storage").chmod(0o775)
    (root / "link").symlink_to("/etc/hostname")
    assert ws.make_private(root) == [root]
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    changed = ws.make_private(root, tree=True)
    assert sorted(changed) == [root / "prefect.db", root / "storage", root / "storage/result"]
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*") if not p.is_symlink()}
    assert modes == {"prefect.db": 0o600, "key": 0o600, "storage": 0o700, "result": 0o400}
    assert ws.make_private(root, tree=True) == []


def test_private_umask_makes_files_private_and_restores_the_umask(tmp_path: Path) -> None:
    """Within private_umask new files are 0600 and folders 0700 (a stricter umask the process
    had is kept); the umask is restored after."""
    old = os.umask(0o022)
    try:
        with ws.private_umask():
            (tmp_path / "f").write_text("x")
            (tmp_path / "d").mkdir()
        assert os.umask(0o027) == 0o022
        with ws.private_umask():
            assert os.umask(0o077) == 0o077
        assert os.umask(0o022) == 0o027
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o700


def test_resolve_home_under_a_file(tmp_path: Path) -> None:
    """A home below a regular file is refused, naming the directory and the fix."""
    (tmp_path / "f").write_text("x")
    msg = r"--home .*/f/home is not a writable directory.*--home"
    with pytest.raises(SdsInputError, match=msg):
        ws.resolve_home(tmp_path / "f" / "home")


def test_resolve_home_read_only(tmp_path: Path) -> None:
    """A read-only directory is refused with SdsInputError. Root writes anywhere, so as root
    (CI) the check runs in a forked child that drops to the ``nobody`` user, on a directory
    ``nobody`` owns and may not write."""
    if os.geteuid() != 0:
        home = tmp_path / "ro"
        home.mkdir()
        home.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            with pytest.raises(SdsInputError, match="not a writable directory"):
                ws.resolve_home(home)
        finally:
            home.chmod(stat.S_IRWXU)
        return
    import pwd
    import tempfile

    nobody = pwd.getpwnam("nobody")
    outer = Path(tempfile.mkdtemp(prefix="sds-ro-home-"))  # tmp_path is root's, 0700
    home = outer / "ro"
    home.mkdir()
    for path in (outer, home):
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    home.chmod(stat.S_IRUSR | stat.S_IXUSR)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no exec (root's interpreter may be unreadable to nobody)
        answer = "accepted"
        try:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            ws.resolve_home(home)
        except SdsInputError as e:
            answer = str(e)
        except BaseException as e:
            answer = f"unexpected {type(e).__name__}: {e}"
        finally:
            os.write(write, answer.encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        answer = f.read().decode()
    os.waitpid(pid, 0)
    try:
        assert "not a writable directory (Permission denied)" in answer, answer
        assert sorted(p.name for p in home.iterdir()) == []  # no probe file left
    finally:
        shutil.rmtree(outer)


@pytest.mark.parametrize("value", ["../x", "a/b", "", " a", ".hidden", "a b", "x" * 129, 3])
def test_validate_id_rejects(value: object) -> None:
    """Ids with separators, spaces, leading dots, bad length or type are refused."""
    with pytest.raises(SdsInputError, match="is not valid"):
        ws.validate_id(value)


def test_new_release_id_format_and_uniqueness() -> None:
    """Ids look like 2026-11-22T031455Z-<6 hex>, validate, and do not repeat."""
    ids = {ws.new_release_id("pums") for _ in range(50)}
    assert len(ids) == 50
    for rid in ids:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d{6}Z-[0-9a-f]{6}", rid)
        assert ws.validate_id(rid) == rid
    with pytest.raises(SdsInputError, match="dataset id"):
        ws.new_release_id("bad/name")


def test_release_paths_layout(tmp_path: Path) -> None:
    """Paths follow the contract; create() refuses an existing id and makes private 0700."""
    p = ws.release_paths(tmp_path, "pums", "r1")
    assert p.release_dir == tmp_path / "releases" / "pums" / "r1"
    assert p.private_dir == tmp_path / "private" / "r1"
    assert p.manifest == p.release_dir / "manifest.json"
    assert p.ledger == tmp_path / "ledger.sqlite"
    assert p.artifact("synthetic.csv") == p.release_dir / "synthetic.csv"
    with pytest.raises(SdsInputError, match="plain file name"):
        p.artifact("../x")
    p.create()
    assert stat.S_IMODE(p.private_dir.stat().st_mode) == 0o700
    with pytest.raises(SdsInputError, match=r"release id 'r1' already exists.*sds resume r1"):
        p.create()
    p.create(exist_ok=True)
    with pytest.raises(SdsInputError, match="dataset id"):
        ws.release_paths(tmp_path, "a/b", "r1")


# -- atomic writes ---------------------------------------------------------------------------------
def test_atomic_writes_round_trip(tmp_path: Path) -> None:
    """Bytes, text, JSON and Parquet (frame and table) land whole, with no temp files left."""
    ws.atomic_write_bytes(tmp_path / "a.bin", b"\x00\x01")
    ws.atomic_write_text(tmp_path / "sub" / "b.txt", "é")
    ws.atomic_write_json(tmp_path / "c.json", {"b": 1, "a": [1, 2]})
    frame = pd.DataFrame({"x": [1, 2, 3], "y": ["a", None, "c"]})
    ws.atomic_write_parquet(tmp_path / "d.parquet", frame)
    ws.atomic_write_parquet(tmp_path / "e.parquet", pa.table({"z": [1.5]}), private=True)
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "sub" / "b.txt").read_text(encoding="utf-8") == "é"
    assert json.loads((tmp_path / "c.json").read_text()) == {"a": [1, 2], "b": 1}
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "d.parquet"), frame)
    assert pq.read_table(tmp_path / "e.parquet").column("z").to_pylist() == [1.5]
    assert stat.S_IMODE((tmp_path / "e.parquet").stat().st_mode) == 0o600
    leftovers = [p.name for p in tmp_path.rglob("*.tmp")]
    assert leftovers == []


def test_atomic_write_failure_keeps_old_file(tmp_path: Path) -> None:
    """A writer that fails midway leaves the previous file intact and no temp file."""
    target = tmp_path / "t.parquet"
    ws.atomic_write_bytes(target, b"old")

    def half_then_crash(f: object) -> None:
        f.write(b"half")  # type: ignore[attr-defined]
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        files._atomic(target, half_then_crash, private=False)  # the core of every atomic writer
    assert target.read_bytes() == b"old" and sorted(tmp_path.iterdir()) == [target]


def test_sha256_file(tmp_path: Path) -> None:
    """sha256_file equals hashlib over the bytes (multi-block file)."""
    data = os.urandom(3 << 20)
    (tmp_path / "x").write_bytes(data)
    assert ws.sha256_file(tmp_path / "x") == hashlib.sha256(data).hexdigest()


# -- manifest and verification ---------------------------------------------------------------------
def _complete_release(home: Path, dataset: str = "pums", rid: str = "r1") -> ws.ReleasePaths:
    p = ws.release_paths(home, dataset, rid)
    p.create()
    m = ws.Manifest.new(
        release_id=rid,
        dataset=dataset,
        parameters={"epsilon": 0.6},
        privacy={"epsilon": 0.6, "delta": 0.0},
    )
    m.save(p.release_dir)
    m.stage_started("synthesize")
    ws.atomic_write_text(p.artifact("synthetic.csv"), "a,b\n1,2\n")
    ws.atomic_write_parquet(p.artifact("synthetic.parquet"), pd.DataFrame({"a": [1], "b": [2]}))
    for name in ("synthetic.csv", "synthetic.parquet"):
        m.record_artifact(name, p.artifact(name))
    m.stage_finished("synthesize", ["synthetic.csv", "synthetic.parquet"])
    m.status = "complete"
    m.save(p.manifest)
    return p


def test_manifest_round_trip(tmp_path: Path) -> None:
    """A saved manifest loads back identical, with contract keys, stages and versions."""
    p = _complete_release(tmp_path)
    m = ws.Manifest.load(p.release_dir)
    assert m.status == "complete" and m.data["release_id"] == "r1"
    assert {
        "release_id",
        "dataset",
        "created_at",
        "status",
        "parameters",
        "privacy",
        "input",
        "stages",
        "artifacts",
        "versions",
    } <= m.data.keys()
    assert set(m.data["versions"]) == {
        "project",
        "python",
        "numpy",
        "pandas",
        "pyarrow",
        "prefect",
        "great_expectations",
    }
    stage = m.stage("synthesize")
    assert stage["status"] == "complete" and stage["artifacts"] == [
        "synthetic.csv",
        "synthetic.parquet",
    ]
    assert m.data["artifacts"]["synthetic.csv"] == ws.sha256_file(p.artifact("synthetic.csv"))
    assert ws.Manifest.load(p.manifest).data == m.data
    with pytest.raises(SdsInputError, match="manifest status must be one of"):
        m.status = "done"
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(SdsInputError, match="is not a release manifest"):
        ws.Manifest.load(tmp_path / "bad.json")


def test_verify_release_detects_tampering(tmp_path: Path) -> None:
    """Edited, deleted and extra files and a non-complete status are all reported."""
    p = _complete_release(tmp_path)
    assert ws.verify_release(p.release_dir) == []
    p.artifact("synthetic.csv").write_text("a,b\n1,3\n")
    (p.release_dir / "extra.txt").write_text("x")
    p.artifact("synthetic.parquet").unlink()
    problems = ws.verify_release(p.release_dir)
    assert any("synthetic.csv: sha256 does not match" in x for x in problems)
    assert any("synthetic.parquet: listed in the manifest but missing" in x for x in problems)
    assert any("extra.txt: file not listed" in x for x in problems)
    m = ws.Manifest.load(p.manifest)
    m.status = "running"
    m.save(p.manifest)
    assert "status is 'running', not 'complete'" in ws.verify_release(p.release_dir)
    assert "cannot read release manifest" in ws.verify_release(tmp_path / "nowhere")[0]


def test_discard_incomplete(tmp_path: Path) -> None:
    """A failed release keeps only a 'failed' manifest; no manifest => directory removed."""
    p = _complete_release(tmp_path)
    removed = ws.discard_incomplete(p.release_dir, reason="validation failed (see private)")
    assert removed == ["synthetic.csv", "synthetic.parquet"]
    assert sorted(x.name for x in p.release_dir.iterdir()) == ["manifest.json"]
    m = ws.Manifest.load(p.manifest)
    assert (m.status, m.data["artifacts"], m.data["failure"]) == (
        "failed",
        {},
        "validation failed (see private)",
    )
    assert ws.verify_release(p.release_dir) == ["status is 'failed', not 'complete'"]
    bare = tmp_path / "releases" / "pums" / "r2"
    bare.mkdir()
    (bare / "synthetic.csv").write_text("x")
    assert ws.discard_incomplete(bare) == ["synthetic.csv"] and not bare.exists()
    bare.mkdir()
    (bare / "manifest.json").write_text("{truncated")
    assert ws.discard_incomplete(bare) == [] and not bare.exists()


def test_forbidden_content_check(tmp_path: Path) -> None:
    """Secrets are found in text and inside compressed Parquet; whole tokens only; not echoed."""
    (tmp_path / "a.csv").write_text("n\n41234\n")
    ws.atomic_write_parquet(
        tmp_path / "b.parquet", pd.DataFrame({"k": ["deadbeefcafe"] * 50 + ["other"]})
    )
    found = ws.forbidden_content_check(tmp_path, secrets=["1234", "DEADBEEFCAFE", "", "41234"])
    assert found == ["a.csv: contains forbidden value #3", "b.parquet: contains forbidden value #1"]
    assert not any("deadbeef" in f.lower() for f in found)


# -- audit -----------------------------------------------------------------------------------------
def _home_with_ledger(tmp_path: Path) -> tuple[Path, Ledger]:
    led = Ledger.open(tmp_path)
    led.set_budget("pums", epsilon=2.0, delta=1e-5)
    plan = [PlannedCharge("count", "laplace", 0.1), PlannedCharge("k1", "laplace", 0.5)]
    led.reserve("pums", "r1", plan)
    for stage in ("count", "k1"):
        led.charge("r1", stage)
    led.complete("r1")
    m = ws.Manifest.load(_complete_release(tmp_path).manifest)
    dirs = ReleaseDirs(tmp_path, "pums", "r1")
    dirs.randomness(None)  # the release key (publish anchors with a key derived from it)
    del m.data["status"]
    dirs.write_manifest(m.data | {"status": "complete"})  # anchored, as publish records it
    led.reserve("pums", "r2", plan)  # running elsewhere: ledger only
    led.charge("r2", "count")
    return tmp_path, led


def test_audit_clean_and_json(tmp_path: Path) -> None:
    """A consistent home audits clean; releases, spend and budgets are reported."""
    home, _ = _home_with_ledger(tmp_path)
    report = audit_home(home, verify=True)
    assert report.ok and report.ledger.ok
    assert [(r.release_id, r.status, r.ledger_status) for r in report.releases] == [
        ("r1", "complete", "completed"),
        ("r2", "no directory", "open"),
    ]
    assert report.releases[0].epsilon_spent == 0.6 and report.releases[1].epsilon_spent == 0.1
    assert report.budgets[0].epsilon_remaining == pytest.approx(0.8)
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True
    assert report.table_rows()[0] == {
        "dataset": "pums",
        "release": "r1",
        "period": "-",
        "status": "complete",
        "ledger": "completed",
        "epsilon": "0.6",
        "delta": "0",
        "artifacts": "2",
        "check": "ok",
    }
    assert audit_home(home, "other").releases == ()


def test_audit_reports_tampering(tmp_path: Path) -> None:
    """Artifact edits and ledger edits both show up as problems under --verify only."""
    home, led = _home_with_ledger(tmp_path)
    ws.release_paths(home, "pums", "r1").artifact("synthetic.csv").write_text("changed")
    conn = sqlite3.connect(led.path)
    conn.execute("DROP TRIGGER ledger_no_update")
    conn.execute("UPDATE ledger SET epsilon = '0.01' WHERE kind = 'charge' AND stage = 'k1'")
    conn.commit()
    conn.close()
    assert audit_home(home, verify=False).problems == ()
    report = audit_home(home, verify=True)
    assert not report.ok
    assert any(p.startswith("ledger: row seq") for p in report.problems)
    assert any("pums/r1: synthetic.csv: sha256 does not match" in p for p in report.problems)


def test_audit_flags_manifest_ledger_mismatch(tmp_path: Path) -> None:
    """A complete manifest whose release is not in the ledger is a problem."""
    _complete_release(tmp_path, rid="ghost")
    Ledger.open(tmp_path)
    report = audit_home(tmp_path, verify=True)
    assert report.problems == (
        "pums/ghost: complete release has no reservation in the ledger",
        "pums/ghost: manifest records no ledger head (ledger_head), so the ledger is not "
        "anchored by this release",
    )


def _rewrite_chain(path: Path, sql: str) -> None:
    """Edit the ledger and re-hash every row and the head, as a careful attacker would."""
    from sds_release.store.ledger.chain import FIELDS, GENESIS_HASH, row_hash

    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    conn.execute("DROP TRIGGER ledger_no_update")
    conn.execute("DROP TRIGGER ledger_no_delete")
    conn.execute(sql)
    prev, seq = GENESIS_HASH, 0
    for row in conn.execute("SELECT * FROM ledger ORDER BY seq").fetchall():
        content = {k: row[k] for k in FIELDS} | {"prev_hash": prev}
        prev, seq = row_hash(content), row["seq"]
        conn.execute(
            "UPDATE ledger SET prev_hash = ?, hash = ? WHERE seq = ?",
            (content["prev_hash"], prev, seq),
        )
    conn.execute("UPDATE meta SET value = ? WHERE key = 'head_seq'", (str(seq),))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (prev,))
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "UPDATE ledger SET epsilon = '0.01' WHERE kind = 'charge' AND stage = 'k1'",
            "no longer has the hash recorded when this release completed: the ledger was rewritten",
        ),
        (
            "DELETE FROM ledger WHERE release_id = 'r1' AND kind = 'close' OR release_id = 'r2'",
            "the ledger has no row 5, the head recorded when this release completed: the ledger "
            "was truncated or replaced",
        ),
    ],
)
def test_audit_detects_a_consistently_rewritten_ledger(
    tmp_path: Path, sql: str, expected: str
) -> None:
    """A re-hashed (chain-valid) edit or truncation is caught by the manifest's ledger head."""
    home, led = _home_with_ledger(tmp_path)
    assert json.loads(_private_anchor(home).read_text())["seq"] == 5  # budget, reserve, 2, close
    _rewrite_chain(led.path, sql)
    report = audit_home(home, verify=True)
    assert report.ledger.ok  # the chain alone no longer shows anything
    assert any(p.startswith("pums/r1: ") and expected in p for p in report.problems)


def test_audit_requires_the_ledger_head(tmp_path: Path) -> None:
    """A complete manifest whose ledger_head was removed is a problem (the anchor is mandatory)."""
    home, _ = _home_with_ledger(tmp_path)
    m = ws.Manifest.load(ws.release_paths(home, "pums", "r1").manifest)
    del m.data["ledger_head"]
    m.save(ws.release_paths(home, "pums", "r1").manifest)
    assert audit_home(home, verify=True).problems == (
        "pums/r1: manifest records no ledger head (ledger_head), so the ledger is not anchored "
        "by this release",
    )


def _private_anchor(home: Path) -> Path:
    return ReleaseDirs(home, "pums", "r1").private_dir / ANCHOR_FILE


def test_audit_opens_the_anchor_commitment(tmp_path: Path) -> None:
    """The manifest's commitment must open to the private head record: a changed commitment,
    a changed or missing record are problems; a release made before commitments (the plain
    {seq, hash} in its manifest) is still checked against the ledger."""
    home, _ = _home_with_ledger(tmp_path)
    path = ws.release_paths(home, "pums", "r1").manifest
    record = json.loads(_private_anchor(home).read_text())
    m = ws.Manifest.load(path)
    m.data["ledger_head"]["commitment"] = "0" * 64
    m.save(path)
    assert audit_home(home, verify=True).problems == (
        "pums/r1: the manifest's ledger_head commitment does not open to the ledger head "
        f"recorded privately ({ANCHOR_FILE}): the manifest or that record was changed",
    )
    _private_anchor(home).unlink()
    assert "cannot be opened" in audit_home(home, verify=True).problems[0]
    m.data["ledger_head"] = record  # an older release's manifest: the plain head
    m.save(path)
    assert audit_home(home, verify=True).problems == ()
    m.data["ledger_head"] = record | {"hash": "ab" * 32}
    m.save(path)
    assert "ledger row 5 no longer has the hash" in audit_home(home, verify=True).problems[0]


def test_audit_empty_home_creates_nothing(tmp_path: Path) -> None:
    """Auditing a home without ledger or releases reports nothing and writes nothing."""
    report = audit_home(tmp_path / "none", verify=True)
    assert report.releases == () and report.ledger is None and report.ok
    assert not (tmp_path / "none").exists()


def test_modules_do_not_import_prefect() -> None:
    """The ledger and workspace modules import without Prefect or GX (the CLI loads them fast)."""
    import subprocess
    import sys

    code = (
        "import sys, sds_release.store.ledger.book, sds_release.store.workspace\n"
        "import sds_release.store.audit.home\n"
        "import sds_release.store.run.workdir, sds_release.store.run.progress\n"
        "print(','.join(m for m in sys.modules "
        "if m.split('.')[0] in ('prefect', 'great_expectations')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert out.stdout.strip() == ""


def test_forbidden_check_reads_svg_text_not_geometry(tmp_path: Path) -> None:
    """A chart's pixel geometry is not data; a number in its title or text is still caught."""
    (tmp_path / "report.html").write_text('<svg viewBox="0 0 400 90"><rect width="400.00"/></svg>')
    assert ws.forbidden_content_check(tmp_path, secrets=["400"]) == []
    (tmp_path / "report.html").write_text('<svg><rect width="4"><title>400</title></rect></svg>')
    assert ws.forbidden_content_check(tmp_path, secrets=["400"]) == [
        "report.html: contains forbidden value #0"
    ]
