"""Signed releases: the home's Ed25519 key pair, ``manifest.sig`` and the check anyone can run.

The publish stage signs ``manifest.json`` (which holds every artifact's sha256) with the home's
signing key, created on first use in ``$SDS_HOME/private/_signing/`` (mode 0600), and writes the
raw 64-byte signature as ``manifest.sig`` and the public key as ``signing-key.pub`` (PEM) next to
it. :func:`verify_signed_release` needs the release directory only (no ledger, no private file);
rotation (:func:`rotate_key`) and the trust model are in ``docs/audit.md``.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from sds_core.errors import SdsInputError
from sds_release.store.workspace.files import atomic_write_bytes, atomic_write_json
from sds_release.store.workspace.home import MANIFEST, PUBLIC_KEY, SIGNATURE, utc_now
from sds_release.store.workspace.integrity import artifact_problems, synthetic_part_problems
from sds_release.store.workspace.manifest import Manifest

__all__ = [
    "SignatureCheck",
    "check_signature",
    "home_public_keys",
    "key_history",
    "key_id",
    "load_public_key",
    "public_pem",
    "rotate_key",
    "sign_release",
    "signing_key",
    "verify_signed_release",
]

SIGNING_DIR = "_signing"
"""Under ``$SDS_HOME/private/``; not a valid release id (ids start with a letter or digit)."""
PRIVATE_KEY_FILE = "ed25519.key"
PUBLIC_KEY_FILE = "ed25519.pub"
RETIRED_DIR = "retired"
HISTORY_FILE = "keys.json"


def _dir(home: str | Path) -> Path:
    return Path(home) / "private" / SIGNING_DIR


def key_id(public_key: Ed25519PublicKey) -> str:
    """The key's fingerprint: ``sha256:`` + hex sha256 of its 32 raw public bytes.

    The same number as ``openssl pkey -pubin -in signing-key.pub -outform DER | tail -c 32 |
    sha256sum``, so anyone can compare it with the fingerprint a custodian publishes.
    """
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def public_pem(public_key: Ed25519PublicKey) -> bytes:
    """The public key as PEM (SubjectPublicKeyInfo): the ``signing-key.pub`` format."""
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_public_key(data: bytes, source: str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM (``signing-key.pub``) or OpenSSH (``ssh-ed25519 ...``) text.

    Raises:
        SdsInputError: not a readable Ed25519 public key (naming ``source``).
    """
    try:
        key: Any = (
            serialization.load_ssh_public_key(data.strip())
            if data.lstrip().startswith(b"ssh-")
            else serialization.load_pem_public_key(data)
        )
    except (ValueError, TypeError) as e:
        raise SdsInputError(
            f"{source} is not a readable public key ({e}); pass the signing-key.pub the "
            "custodian publishes (PEM, '-----BEGIN PUBLIC KEY-----')"
        ) from e
    if not isinstance(key, Ed25519PublicKey):
        raise SdsInputError(
            f"{source} holds a {type(key).__name__}, not an Ed25519 public key; releases are "
            "signed with Ed25519"
        )
    return key


def _write_new_key(path: Path, key: Ed25519PrivateKey, *, replace: bool) -> None:
    """Write the private key (0600): fully to a temp file, then link it in place atomically.

    Without ``replace`` an existing key wins (two first publishes at once agree on one key).
    """
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails if a key exists: never overwrite one
            except FileExistsError:
                pass
    finally:
        tmp.unlink(missing_ok=True)


def signing_key(home: str | Path, *, create: bool = True) -> Ed25519PrivateKey:
    """The home's signing key; created on first use (``create``) in ``private/_signing/``.

    Raises:
        SdsInputError: there is no key and ``create`` is False, or the key file is unreadable.
    """
    d = _dir(home)
    path = d / PRIVATE_KEY_FILE
    if not path.is_file():
        if not create:
            raise SdsInputError(
                f"the home {home} has no signing key ({path}); it is created by the first "
                "`sds release` that publishes, or by `sds signing-key show`"
            )
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d.parent, 0o700)
        os.chmod(d, 0o700)
        _write_new_key(path, Ed25519PrivateKey.generate(), replace=False)
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as e:
        raise SdsInputError(
            f"cannot read the signing key {path} ({e}); restore it from a backup, or start a "
            "new key with `sds signing-key rotate` (releases signed before keep their key)"
        ) from e
    if not isinstance(key, Ed25519PrivateKey):
        raise SdsInputError(f"{path} is not an Ed25519 private key")
    pub = d / PUBLIC_KEY_FILE
    pem = public_pem(key.public_key())
    if not pub.is_file() or pub.read_bytes() != pem:
        atomic_write_bytes(pub, pem, private=True)  # public, but it lives in private/
    _note_key(d, key_id(key.public_key()))
    return key


def _history(d: Path) -> list[dict[str, Any]]:
    path = d / HISTORY_FILE
    return list(json.loads(path.read_text())) if path.is_file() else []


def _note_key(d: Path, kid: str) -> None:
    keys = _history(d)
    if not any(k["key_id"] == kid for k in keys):
        atomic_write_json(
            d / HISTORY_FILE,
            [*keys, {"key_id": kid, "created_at": utc_now()}],
            private=True,
        )


def home_public_keys(home: str | Path) -> dict[str, str]:
    """Every public key of the home (its current and retired keys): key id -> status."""
    d = _dir(home)
    found = {}
    for path in sorted((d / RETIRED_DIR).glob("*.pub")):
        found[key_id(load_public_key(path.read_bytes(), str(path)))] = "retired"
    current = d / PUBLIC_KEY_FILE
    if current.is_file():
        found[key_id(load_public_key(current.read_bytes(), str(current)))] = "current"
    return found


def key_history(home: str | Path) -> list[dict[str, Any]]:
    """The home's signing keys in order: ``key_id``, ``created_at`` and (rotated) ``retired_at``."""
    return _history(_dir(home))


def rotate_key(home: str | Path) -> tuple[str | None, str]:
    """Replace the home's signing key with a new one; returns (old key id or None, new key id).

    The old public key is kept in ``private/_signing/retired/`` (so ``sds audit --verify``
    still recognises releases it signed) and its private key file is replaced: nothing signs
    with it any more. Releases signed before keep their ``manifest.sig`` and
    ``signing-key.pub``.
    """
    d = _dir(home)
    old_id = None
    if (d / PRIVATE_KEY_FILE).is_file():
        old = signing_key(home, create=False).public_key()
        old_id = key_id(old)
        name = old_id.removeprefix("sha256:") + ".pub"
        atomic_write_bytes(d / RETIRED_DIR / name, public_pem(old), private=True)
        atomic_write_json(
            d / HISTORY_FILE,
            [
                {**k, "retired_at": k.get("retired_at") or utc_now()}
                if k["key_id"] == old_id
                else k
                for k in _history(d)
            ],
            private=True,
        )
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    _write_new_key(d / PRIVATE_KEY_FILE, Ed25519PrivateKey.generate(), replace=True)
    return old_id, key_id(signing_key(home, create=False).public_key())


def sign_release(home: str | Path, release_dir: str | Path) -> str:
    """Sign ``release_dir/manifest.json`` with the home's key; returns the key id.

    Writes ``manifest.sig`` (the raw 64-byte Ed25519 signature of the manifest's bytes) and
    ``signing-key.pub`` (PEM). Ed25519 signatures are deterministic: signing the same manifest
    with the same key again writes the same bytes.
    """
    release_dir = Path(release_dir)
    key = signing_key(home)
    signature = key.sign((release_dir / MANIFEST).read_bytes())
    atomic_write_bytes(release_dir / PUBLIC_KEY, public_pem(key.public_key()))
    atomic_write_bytes(release_dir / SIGNATURE, signature)
    return key_id(key.public_key())


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """What ``sds verify`` found: the signing key, where it came from, and every problem.

    Attributes:
        release_dir: the directory checked.
        key_id: the fingerprint of the key the signature was checked with (None: no key).
        key_source: ``given`` (``--public-key``) or ``included`` (the release's own
            ``signing-key.pub``: proves integrity, not origin).
        signature_valid: the signature over ``manifest.json`` checks with that key.
        problems: every problem found (empty = verified).
    """

    release_dir: str
    key_id: str | None
    key_source: str
    signature_valid: bool
    release_id: str | None = None
    dataset: str | None = None
    artifacts: int = 0
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """Signature valid and every artifact intact."""
        return self.signature_valid and not self.problems

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (for ``--json``)."""
        return {
            "release_dir": self.release_dir,
            "release_id": self.release_id,
            "dataset": self.dataset,
            "key_id": self.key_id,
            "key_source": self.key_source,
            "signature_valid": self.signature_valid,
            "artifacts": self.artifacts,
            "problems": list(self.problems),
            "ok": self.ok,
        }


def check_signature(
    release_dir: Path,
    public_key: Ed25519PublicKey | None = None,
    *,
    manifest: str = MANIFEST,
    signature: str = SIGNATURE,
) -> tuple[Ed25519PublicKey | None, bool, list[str]]:
    """The signature of ``release_dir/manifest.json`` alone: (key used, valid, problems).

    ``public_key`` None uses the release's own ``signing-key.pub``; a given key must also be
    the one the release ships. ``manifest`` and ``signature`` name another signed file and its
    signature in the folder (a series: ``series.json``, ``series.sig``).
    """
    problems: list[str] = []
    included = release_dir / PUBLIC_KEY
    if public_key is None and included.is_file():
        try:
            public_key = load_public_key(included.read_bytes(), str(included))
        except SdsInputError as e:
            problems.append(str(e))
    elif public_key is None:
        problems.append(
            f"no {PUBLIC_KEY} in the release and no --public-key given: nothing to check the "
            "signature with"
        )
    elif included.is_file():
        try:
            theirs = load_public_key(included.read_bytes(), str(included))
            if key_id(theirs) != key_id(public_key):
                problems.append(
                    f"the release's {PUBLIC_KEY} ({key_id(theirs)}) is not the given key "
                    f"({key_id(public_key)})"
                )
        except SdsInputError as e:
            problems.append(str(e))
    valid = False
    manifest_path, sig_path = release_dir / manifest, release_dir / signature
    if not manifest_path.is_file():
        problems.append(f"no {manifest} in {release_dir}")
    elif not sig_path.is_file():
        what = "release" if manifest == MANIFEST else manifest
        problems.append(f"no {signature}: the {what} is not signed")
    elif public_key is not None:
        try:
            public_key.verify(sig_path.read_bytes(), manifest_path.read_bytes())
            valid = True
        except InvalidSignature:
            problems.append(
                f"the signature {signature} does not match {manifest} under key "
                f"{key_id(public_key)}: the manifest was changed after signing, or signed "
                "with another key"
            )
    return public_key, valid, problems


def verify_signed_release(
    release_dir: str | Path, public_key: Ed25519PublicKey | None = None
) -> SignatureCheck:
    """Check a release directory's signature and every artifact's sha256, from its files alone.

    Args:
        release_dir: a published release directory, wherever it was copied to.
        public_key: the custodian's key, obtained separately (``--public-key``); None uses the
            release's own ``signing-key.pub``, which proves the files were not changed after
            signing but not who signed them.

    Raises:
        SdsInputError: ``release_dir`` is not a directory.
    """
    release_dir = Path(release_dir)
    if not release_dir.is_dir():
        raise SdsInputError(
            f"{release_dir} is not a directory; pass the directory holding manifest.json, "
            "manifest.sig and the artifacts"
        )
    source = "given" if public_key is not None else "included"
    public_key, valid, problems = check_signature(release_dir, public_key)
    manifest_path = release_dir / MANIFEST
    manifest: dict[str, Any] = {}
    if manifest_path.is_file():
        try:
            manifest = Manifest.load(manifest_path).data
        except SdsInputError as e:
            problems.append(str(e))
    if manifest:
        if manifest.get("status") != "complete":
            problems.append(f"manifest status is {manifest.get('status')!r}, not 'complete'")
        listed = manifest.get("artifacts") or {}
        if not isinstance(listed, dict):
            problems.append("manifest 'artifacts' is not a name -> sha256 table")
            listed = {}
        problems += artifact_problems(release_dir, listed)
        problems += synthetic_part_problems(release_dir, manifest)
    return SignatureCheck(
        release_dir=str(release_dir),
        key_id=key_id(public_key) if public_key is not None else None,
        key_source=source,
        signature_valid=valid,
        release_id=manifest.get("release_id"),
        dataset=manifest.get("dataset"),
        artifacts=len(manifest.get("artifacts") or {}) if manifest else 0,
        problems=tuple(problems),
    )
