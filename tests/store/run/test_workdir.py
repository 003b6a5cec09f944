"""The flow's private working state: layout from sds_release.store.workspace, key, checkpoints,
manifest."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.ledger.anchor import ANCHOR_FILE, anchor_commitment, anchor_key
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.values import PlannedCharge
from sds_release.store.run.workdir import ReleaseDirs
from sds_release.store.workspace.home import release_paths


def test_layout_is_the_workspace_layout(tmp_path: Path) -> None:
    """ReleaseDirs places a release exactly where sds_release.store.workspace.home.ReleasePaths
    says."""
    dirs = ReleaseDirs(tmp_path, "pums", "r1")
    paths = release_paths(tmp_path, "pums", "r1")
    assert (dirs.release_dir, dirs.private_dir) == (paths.release_dir, paths.private_dir)
    assert dirs.checkpoint_dir == paths.private_dir / "checkpoints"


def test_key_is_private_and_stable(tmp_path: Path) -> None:
    """The release key is written once with mode 0600 and loaded back unchanged."""
    dirs = ReleaseDirs(tmp_path, "pums", "r1")
    key = dirs.randomness(7).key
    path = dirs.private_dir / "release.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert dirs.randomness(None).key == key == dirs.randomness(8).key


def test_checkpoint_round_trip_and_tamper_check(tmp_path: Path) -> None:
    """A checkpoint loads back; an edited one is refused naming the stage and `sds cancel`."""
    dirs = ReleaseDirs(tmp_path, "pums", "r1")
    assert dirs.load_checkpoint("count") is None
    dirs.save_checkpoint("count", {"n": 41})
    dirs.update_state(fingerprint="f")
    assert dirs.load_checkpoint("count") == {"n": 41}
    assert dirs.state()["fingerprint"] == "f" and "count" in dirs.state()["stages"]
    (dirs.checkpoint_dir / "count.pkl").write_bytes(b"x")
    with pytest.raises(SdsInputError, match=r"checkpoint of stage 'count'.*sds cancel r1"):
        dirs.load_checkpoint("count")


def test_complete_manifest_is_anchored_to_the_ledger_head(tmp_path: Path) -> None:
    """Writing a manifest as complete keeps the ledger head (row and hash) privately and gives
    the manifest only a keyed commitment to the hash: no row number, no plain ledger hash (the
    rows' count would show refused or failed releases; a plain hash would let a reader test a
    guess of the ledger). A running manifest is not anchored."""
    led = Ledger.open(tmp_path)
    led.set_budget("pums", epsilon=1.0, delta=1e-5)
    led.reserve("pums", "r1", [PlannedCharge("count", "laplace", 0.5)])
    dirs = ReleaseDirs(tmp_path, "pums", "r1")
    key = dirs.randomness(None).key
    dirs.write_manifest({"release_id": "r1", "dataset": "pums", "status": "running"})
    assert "ledger_head" not in dirs.manifest()
    led.charge("r1", "count")
    led.complete("r1")
    dirs.write_manifest(dirs.manifest() | {"status": "complete"})
    seq, digest = led.head()
    private = dirs.private_dir / ANCHOR_FILE
    assert json.loads(private.read_text()) == {"seq": seq, "hash": digest} and seq == 4
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    published = dirs.paths.manifest.read_text()
    head = json.loads(published)["ledger_head"]
    assert set(head) == {"commitment", "commitment_scheme", "commitment_note"}
    assert head["commitment"] == anchor_commitment(anchor_key(key), digest)["commitment"]
    assert digest not in published and '"seq"' not in published


def test_a_damaged_checkpoint_is_computed_again_only_to_the_same_bytes(tmp_path: Path) -> None:
    """A truncated checkpoint is reported with its path; saving the stage's result again is
    accepted only when it gives the recorded bytes, else refused naming the file and the fix
    (the damaged file left as it is)."""
    from sds_release.store.run.workdir import DamagedCheckpoint

    dirs = ReleaseDirs(tmp_path, "pums", "r1")
    dirs.save_checkpoint("count", {"n": 41})
    path = dirs.checkpoint_dir / "count.pkl"
    path.write_bytes(path.read_bytes()[:5])  # truncated on disk
    with pytest.raises(DamagedCheckpoint) as damaged:
        dirs.load_checkpoint("count")
    assert damaged.value.path == path
    with pytest.raises(SdsInputError, match=r"count\.pkl.*other bytes.*restore.*sds resume r1"):
        dirs.save_checkpoint("count", {"n": 42})
    assert len(path.read_bytes()) == 5
    assert sorted(f.name for f in dirs.checkpoint_dir.iterdir()) == ["count.pkl"]  # no temp left
    dirs.save_checkpoint("count", {"n": 41})
    assert dirs.load_checkpoint("count") == {"n": 41}


def test_a_checkpoint_is_streamed_to_the_canonical_bytes(tmp_path: Path) -> None:
    """save_checkpoint writes the pickle as it is made (large arrays straight to the file, not
    held as bytes too): the file and its recorded sha256 are those of the pickle made in memory
    (protocol 5, no memo: the checkpoints' bytes before), byte for byte; so is canonical_pickle."""
    import hashlib
    import io
    import pickle

    import numpy as np

    from sds_core.data.domain import Domain
    from sds_core.data.table import PreparedTable
    from sds_release.store.run.workdir import canonical_pickle

    codes = np.random.default_rng(2).integers(-1, 3, size=(100_000, 3)).astype(np.int32)
    shared = np.arange(70_000)  # twice in the result: written twice, as without the memo
    result = {"t": PreparedTable(Domain(("a", "b", "c"), (("x", "y", "z"),) * 3), codes)}
    result |= {"one": shared, "two": shared, "n": 7}
    dirs = ReleaseDirs(tmp_path, "pums", "r1")
    dirs.save_checkpoint("synthesize", result)
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=5)
    pickler.fast = True
    pickler.dump(result)
    data = buf.getvalue()
    assert len(data) > 1_500_000 and canonical_pickle(result) == data
    assert (dirs.checkpoint_dir / "synthesize.pkl").read_bytes() == data
    assert dirs.state()["stages"]["synthesize"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert np.array_equal(dirs.load_checkpoint("synthesize")["t"].codes, codes)


def test_a_checkpoint_written_before_the_package_move_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint that pickled a store class under the package's former name
    (``release_store.*``, before 0.2.0 moved it under ``sds_release``) loads as that class."""
    import sys
    import types

    import sds_release.store.run.results as results

    noise = results.LengthNoise(allowed_sensitivity=2, threshold=3.5)
    monkeypatch.setitem(sys.modules, "release_store", types.ModuleType("release_store"))
    monkeypatch.setitem(sys.modules, "release_store.run", types.ModuleType("release_store.run"))
    monkeypatch.setitem(sys.modules, "release_store.run.results", results)
    monkeypatch.setattr(results.LengthNoise, "__module__", "release_store.run.results")
    dirs = ReleaseDirs(tmp_path, "pums", "r1")
    dirs.save_checkpoint("aggregate-1", {"noise": noise})
    assert b"release_store.run.results" in next(dirs.checkpoint_dir.iterdir()).read_bytes()
    monkeypatch.undo()  # the old package is gone again, as after an upgrade
    assert "release_store" not in sys.modules
    loaded = dirs.load_checkpoint("aggregate-1")
    assert loaded == {"noise": noise} and type(loaded["noise"]) is results.LengthNoise
