"""Signed releases without a flow run: the home key, manifest.sig, `sds verify`, rotation."""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from sds_core.errors import SdsInputError
from sds_release.store.audit.home import signature_problems
from sds_release.store.audit.signing import (
    key_history,
    key_id,
    sign_release,
    signing_key,
    verify_signed_release,
)
from sds_release.store.workspace.files import sha256_file
from sds_release.store.workspace.home import release_paths
from sds_release.store.workspace.integrity import verify_release
from sds_release.store.workspace.manifest import Manifest
from tests.helpers import run_cli


def _publish(home: Path, release_id: str = "r1") -> Path:
    """A complete two-artifact release directory of dataset ``pums`` (as publish leaves it)."""
    paths = release_paths(home, "pums", release_id)
    paths.create()
    (paths.release_dir / "aggregates.tsv").write_text("selections\tprotected_count\nA:1\t12\n")
    (paths.release_dir / "synthetic.csv").write_text("A\n1\n1\n")
    m = Manifest.new(release_id=release_id, dataset="pums", parameters={"epsilon": 2.0})
    for name in ("aggregates.tsv", "synthetic.csv"):
        m.record_artifact(name, paths.release_dir / name)
    m.status = "complete"
    m.save(paths.release_dir)
    return paths.release_dir


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Path, Path]:
    """(home, release directory) of a release signed with the home's key."""
    home = tmp_path / "home"
    release = _publish(home)
    sign_release(home, release)
    return home, release


def _export_key(home: Path, dest: Path) -> Path:
    """The home's public key as the custodian publishes it (`sds signing-key show`)."""
    code, out, err = run_cli("signing-key", "show", "--json", "--home", str(home))
    assert code == 0, err
    dest.write_text(json.loads(out)["public_key"])
    return dest


def test_key_is_created_private_on_first_use(tmp_path: Path) -> None:
    """The key file is 0600 in a 0700 directory, written once and loaded back unchanged."""
    home = tmp_path / "home"
    first = key_id(signing_key(home).public_key())
    path = home / "private" / "_signing" / "ed25519.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert key_id(signing_key(home).public_key()) == first
    assert [k["key_id"] for k in key_history(home)] == [first]


def test_concurrent_first_use_agrees_on_one_key(tmp_path: Path) -> None:
    """Eight first publishes at once all sign with the same, single key."""
    home = tmp_path / "home"
    barrier, ids = threading.Barrier(8), []

    def first_use() -> None:
        barrier.wait()
        ids.append(key_id(signing_key(home).public_key()))

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and len(ids) == 8
    assert key_id(signing_key(home).public_key()) == ids[0]


def test_no_key_without_create(tmp_path: Path) -> None:
    """Asking for an existing key where there is none names the file and how one is made."""
    with pytest.raises(SdsInputError, match=r"has no signing key .*sds signing-key show"):
        signing_key(tmp_path, create=False)


def test_signed_release_verifies(signed: tuple[Path, Path]) -> None:
    """A fresh signature checks, every hash checks, and audit sees one of the home's keys."""
    home, release = signed
    check = verify_signed_release(release)
    assert check.ok and check.key_source == "included" and check.artifacts == 2
    assert check.key_id == key_id(signing_key(home).public_key())
    assert verify_release(release) == []  # manifest.sig and signing-key.pub are expected files
    assert signature_problems(home, release) == (check.key_id, [])


def test_signing_is_deterministic(signed: tuple[Path, Path]) -> None:
    """Signing the same manifest again with the same key writes the same bytes."""
    home, release = signed
    before = (release / "manifest.sig").read_bytes()
    sign_release(home, release)
    assert (release / "manifest.sig").read_bytes() == before and len(before) == 64


def test_edited_artifact_fails_verify(signed: tuple[Path, Path], tmp_path: Path) -> None:
    """Editing a published file fails `sds verify`, naming the file (the signature is intact)."""
    home, release = signed
    with (release / "aggregates.tsv").open("a") as f:
        f.write("A:2\t5\n")
    key = _export_key(home, tmp_path / "custodian.pub")
    code, out, _ = run_cli("verify", str(release), "--public-key", str(key))
    assert code == 1
    assert "aggregates.tsv: sha256 does not match the manifest" in out
    assert "NOT verified" in out


def test_edited_manifest_fails_verify(signed: tuple[Path, Path], tmp_path: Path) -> None:
    """An edited manifest (even with matching artifact hashes) breaks the signature."""
    _home, release = signed
    with (release / "aggregates.tsv").open("a") as f:
        f.write("A:2\t5\n")
    m = Manifest.load(release)
    m.record_artifact("aggregates.tsv", release / "aggregates.tsv")  # the hash made to match
    m.save(release)
    code, out, _ = run_cli("verify", str(release), "--json")
    assert code == 1
    report = json.loads(out)
    assert not report["signature_valid"] and not report["ok"]
    assert any("does not match manifest.json" in p for p in report["problems"])


def test_resigned_by_another_key_is_caught(signed: tuple[Path, Path], tmp_path: Path) -> None:
    """An edit re-signed with someone else's key passes only the key-less integrity check.

    With the custodian's public key (`--public-key`) verification fails, and the home's audit
    reports a key that is not its own.
    """
    home, release = signed
    custodian = _export_key(home, tmp_path / "custodian.pub")
    m = Manifest.load(release)
    m.data["parameters"]["epsilon"] = 0.1
    m.save(release)
    sign_release(tmp_path / "attacker-home", release)  # a valid signature by another key
    assert run_cli("verify", str(release))[0] == 0  # unchanged since *somebody* signed it
    code, out, _ = run_cli("verify", str(release), "--public-key", str(custodian))
    assert code == 1 and "is not the given key" in out and "does not match" in out
    signer, problems = signature_problems(home, release)
    assert signer is None and "not one of this home's signing keys" in problems[0]


def test_copied_release_verifies_with_only_its_public_key(
    signed: tuple[Path, Path], tmp_path: Path
) -> None:
    """A release copied anywhere (no home, no ledger, no private files) verifies with the key."""
    home, release = signed
    key = _export_key(home, tmp_path / "custodian.pub")
    download = tmp_path / "downloads" / "my-copy"
    shutil.copytree(release, download)
    shutil.rmtree(home)
    code, out, err = run_cli("verify", str(download), "--public-key", str(key))
    assert code == 0, out + err
    assert "signature: valid, by the given key sha256:" in out and out.strip().endswith("verified")


def test_unsigned_release_fails_verify(tmp_path: Path) -> None:
    """A release without manifest.sig is not verified, and the message says so."""
    release = _publish(tmp_path / "home")
    code, out, _ = run_cli("verify", str(release))
    assert code == 1 and "no manifest.sig: the release is not signed" in out
    assert "no signing-key.pub in the release" in out
    assert signature_problems(tmp_path / "home", release) == (None, [])  # audit: older release


def test_verify_refuses_a_key_that_is_not_ed25519(
    signed: tuple[Path, Path], tmp_path: Path
) -> None:
    """An RSA key given as --public-key is refused with exit 2, naming the option."""
    rsa_pub = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    path = tmp_path / "rsa.pub"
    path.write_bytes(
        rsa_pub.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    code, _, err = run_cli("verify", str(signed[1]), "--public-key", str(path))
    assert code == 2 and "not an Ed25519 public key" in err and "--public-key" in err
    code, _, err = run_cli("verify", str(tmp_path / "nowhere"))
    assert code == 2 and "is not a directory" in err


OPENSSL_VERIFY = (
    "openssl pkeyutl -verify -pubin -inkey signing-key.pub -rawin -in manifest.json "
    "-sigfile manifest.sig"
)
"""The command docs/audit.md gives for checking a release without sds."""


def test_openssl_checks_the_signature_and_fingerprint(signed: tuple[Path, Path]) -> None:
    """Standard OpenSSL verifies manifest.sig and computes the same key fingerprint."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    _, release = signed
    done = subprocess.run(
        OPENSSL_VERIFY.split(),
        cwd=release,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "Signature Verified Successfully" in done.stdout
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-in", "signing-key.pub", "-outform", "DER"],
        cwd=release,
        capture_output=True,
        check=True,
    ).stdout
    assert (
        "sha256:" + hashlib.sha256(der[-32:]).hexdigest() == verify_signed_release(release).key_id
    )


def test_rotation_keeps_old_releases_verifiable(signed: tuple[Path, Path], tmp_path: Path) -> None:
    """After rotation: old releases verify with the old key, new ones are signed by the new key,
    audit knows both, and `sds sign` moves an old release to the new key."""
    home, old_release = signed
    old_key = _export_key(home, tmp_path / "old.pub")
    old_private = (home / "private" / "_signing" / "ed25519.key").read_bytes()
    code, out, _ = run_cli("signing-key", "rotate", "--home", str(home))
    assert code == 0 and "retired key: sha256:" in out
    assert (home / "private" / "_signing" / "ed25519.key").read_bytes() != old_private
    new_key = _export_key(home, tmp_path / "new.pub")
    assert old_key.read_text() != new_key.read_text()

    assert run_cli("verify", str(old_release), "--public-key", str(old_key))[0] == 0
    assert signature_problems(home, old_release)[1] == []  # a retired key is still the home's
    new_release = _publish(home, "r2")
    code, out, err = run_cli("sign", "r2", "--home", str(home))
    assert code == 0, err
    assert run_cli("verify", str(new_release), "--public-key", str(new_key))[0] == 0
    assert run_cli("verify", str(new_release), "--public-key", str(old_key))[0] == 1

    assert run_cli("sign", "r1", "--home", str(home))[0] == 0  # re-signed with the new key
    assert run_cli("verify", str(old_release), "--public-key", str(new_key))[0] == 0
    history = key_history(home)
    assert len(history) == 2 and "retired_at" in history[0] and "retired_at" not in history[1]


def test_sign_refuses_a_modified_release(signed: tuple[Path, Path]) -> None:
    """`sds sign` does not sign a release whose files no longer match its manifest."""
    home, release = signed
    before = sha256_file(release / "manifest.sig")
    (release / "synthetic.csv").write_text("A\n2\n")
    code, _, err = run_cli("sign", "r1", "--home", str(home))
    assert code == 1 and "synthetic.csv" in err and "not signed" in err
    assert sha256_file(release / "manifest.sig") == before
    assert run_cli("sign", "nope", "--home", str(home))[0] == 2
