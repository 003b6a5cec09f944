"""The input's published fingerprint: a keyed commitment, never the plain hash of the data.

The ingest stage computes the input's sha256 (a Parquet dataset's digest over its parts); the
manifest publishes ``input.commitment`` = HMAC-SHA256(commitment key, that digest), whose 256-bit
key stays in the private workspace next to the release key. Without the key the commitment
reveals nothing about the input (HMAC is a PRF), so a reader who knows all rows but one cannot
confirm a guess by hashing candidate files; with the key, ``sds audit --replay`` still proves the
input. Manifests made before (``input.sha256``, the plain hash) stay readable.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

from sds_core.errors import SdsInputError

__all__ = [
    "COMMITMENT_KEY_BYTES",
    "COMMITMENT_SCHEME",
    "commitment_key",
    "fingerprint_matches",
    "input_commitment",
    "input_fingerprint",
]

COMMITMENT_SCHEME = "hmac-sha256"
"""``input.commitment_scheme`` of the manifest: HMAC-SHA256 keyed by the private commitment key,
over the ASCII hex sha256 of the input (the ingest stage's digest)."""

COMMITMENT_KEY_BYTES = 32

_HOW_TO_CHECK = (
    "HMAC-SHA256, keyed by the release's private commitment key "
    "(private/<release-id>/input-commitment.key), of the input's sha256 in lowercase hex (a "
    "Parquet dataset: its digest over the part files). It hides the input from anyone without "
    "the key and binds the release to it: `sds audit RELEASE_ID --replay --input PATH` checks it"
)


def commitment_key(seed: int | None) -> bytes:
    """A new commitment key: 32 bytes from the OS CSPRNG, or derived from a test ``seed``.

    A seeded release (tests, benchmarks) is reproducible and not private anyway: its key is
    derived from the seed like its release key, so its files stay byte-identical across runs.

    >>> len(commitment_key(None)), commitment_key(7) == commitment_key(7)
    (32, True)
    """
    if seed is None:
        return secrets.token_bytes(COMMITMENT_KEY_BYTES)
    return hashlib.sha256(b"sds-input-commitment-seed\0" + str(seed).encode()).digest()


def input_commitment(key: bytes, digest: str) -> str:
    """HMAC-SHA256 of the input digest (lowercase hex) under ``key``, in lowercase hex.

    >>> input_commitment(bytes(32), "ab" * 32)[:16]
    '95a3a76807eb706d'

    Raises:
        SdsInputError: the key is not 32 bytes or the digest is not a sha256 in hex.
    """
    if len(key) != COMMITMENT_KEY_BYTES:
        raise SdsInputError(
            f"the input commitment key must be {COMMITMENT_KEY_BYTES} bytes, got {len(key)}; "
            "restore private/<release-id>/input-commitment.key from a backup"
        )
    text = digest.lower()
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise SdsInputError(f"an input digest is a sha256 in hex (64 characters), got {digest!r}")
    return hmac.new(key, text.encode("ascii"), hashlib.sha256).hexdigest()


def input_fingerprint(key: bytes | None, digest: str) -> dict[str, str]:
    """The manifest's ``input`` fields that identify the input.

    With a key: ``commitment``, ``commitment_scheme`` and how to check it. ``key=None`` gives
    the plain ``sha256`` of releases made before commitments, and only a replay of such a
    release asks for it (to rebuild its manifest as it was published).
    """
    if key is None:
        return {"sha256": digest}
    return {
        "commitment": input_commitment(key, digest),
        "commitment_scheme": COMMITMENT_SCHEME,
        "commitment_note": _HOW_TO_CHECK,
    }


def fingerprint_matches(recorded: Mapping[str, Any], key: bytes | None, digest: str) -> bool:
    """Whether a manifest's ``input`` section fingerprints the input of sha256 ``digest``.

    A commitment needs ``key``; a manifest from before commitments holds the plain ``sha256``.
    """
    if recorded.get("commitment") is not None:
        if recorded.get("commitment_scheme") != COMMITMENT_SCHEME or key is None:
            return False
        return hmac.compare_digest(str(recorded["commitment"]), input_commitment(key, digest))
    return recorded.get("sha256") == digest
