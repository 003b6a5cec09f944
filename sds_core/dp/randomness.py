"""Release randomness: one 256-bit secret key per release, split into labelled streams.

Noise that protects data reads uniform 64-bit words from SHAKE-256(key, label) through
:meth:`ReleaseRandomness.words`; randomness the privacy proof does not rely on (contribution
subsets, synthesis sampling) uses :meth:`ReleaseRandomness.generator`, a numpy Generator
seeded from the same key and a label, or :meth:`ReleaseRandomness.record_key` where each record
draws its own (contribution subsets: identical at any partitioning). Same key + label =>
identical draws, which is what makes a resumed release identical. The key is as secret as the data.
"""

from __future__ import annotations

import hashlib
import secrets

import numpy as np
from numpy.typing import NDArray

from sds_core.errors import SdsInputError

KEY_BYTES = 32


class ReleaseRandomness:
    """Labelled, reproducible random streams derived from one secret release key.

    Args:
        key: exactly 32 secret bytes. Use :meth:`fresh` for a release, never reuse a key.

    >>> r = ReleaseRandomness(bytes(32))
    >>> a = r.words("rel/count", 4, stage="count")
    >>> bool((a == r.words("rel/count", 4, stage="count")).all())
    True
    >>> r.generator("synthesis").integers(0, 10, 3).shape
    (3,)
    """

    __slots__ = ("_key", "_label_stage")

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes | bytearray) or len(key) != KEY_BYTES:
            got = len(key) if isinstance(key, bytes | bytearray) else type(key).__name__
            raise SdsInputError(
                f"release key must be exactly {KEY_BYTES} bytes, got {got}; "
                "use ReleaseRandomness.fresh() for a new release"
            )
        self._key = bytes(key)
        self._label_stage: dict[str, str] = {}

    @classmethod
    def fresh(cls) -> ReleaseRandomness:
        """A new release key from the operating system's CSPRNG."""
        return cls(secrets.token_bytes(KEY_BYTES))

    @classmethod
    def from_seed(cls, seed: int) -> ReleaseRandomness:
        """Derive the key from an integer seed (reproducible runs and tests).

        A small integer seed can be guessed: releases meant for publication should use
        :meth:`fresh` (the pipeline's default) and keep the key private.
        """
        if not isinstance(seed, int) or seed < 0:
            raise SdsInputError(f"seed must be a non-negative integer, got {seed!r}")
        return cls(hashlib.sha256(b"sds-release-seed\0" + str(seed).encode()).digest())

    @property
    def key(self) -> bytes:
        """The secret key (store it only in the private workspace)."""
        return self._key

    def words(self, label: str, n: int, *, stage: str) -> NDArray[np.uint64]:
        """``n`` uniform 64-bit words from SHAKE-256(key, label), for privacy noise.

        A label belongs to one stage: using it for a different stage raises SdsInputError
        (two stages must never share noise). Re-reading the same label for the same stage
        returns the identical words.
        """
        if n < 0:
            raise SdsInputError(f"number of words must be >= 0, got {n}")
        owner = self._label_stage.setdefault(label, stage)
        if owner != stage:
            raise SdsInputError(
                f"noise label {label!r} was already used by stage {owner!r}; stage {stage!r} "
                "must use its own label (noise is never shared between stages)"
            )
        if n == 0:
            return np.zeros(0, dtype=np.uint64)
        xof = hashlib.shake_256(self._key + b"\0noise\0" + label.encode())
        return np.frombuffer(xof.digest(8 * n), dtype="<u8").astype(np.uint64, copy=False)

    def record_key(self, label: str) -> int:
        """A 64-bit key for per-record randomness the privacy proof does not rely on.

        Keyed by the record (its global row number) with
        :func:`sds_core.marginals.contributions.record_priorities`, so the draws do not depend
        on how the records are split into partitions, batches or workers.
        """
        digest = hashlib.shake_256(self._key + b"\0records\0" + label.encode()).digest(8)
        return int.from_bytes(digest, "little")

    def generator(self, label: str) -> np.random.Generator:
        """A numpy Generator for randomness the privacy proof does not rely on."""
        seed = hashlib.shake_256(self._key + b"\0generator\0" + label.encode()).digest(32)
        return np.random.Generator(np.random.PCG64(np.frombuffer(seed, dtype="<u4")))
