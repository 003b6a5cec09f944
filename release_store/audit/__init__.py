"""Checking releases after the fact: the home's audit, replaying a release, signatures.

- ``home``: ``sds audit``: every release of a home, with integrity checks;
- ``replay``: ``sds audit --replay``: what a release recorded and the byte comparison;
- ``signing``: the home's Ed25519 key, ``manifest.sig`` and ``sds verify``.

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "AuditReport": "release_store.audit.home",
    "Check": "release_store.audit.replay",
    "LOCAL_ONLY": "release_store.audit.replay",
    "RUN_FACTS": "release_store.audit.replay",
    "RecordedRelease": "release_store.audit.replay",
    "ReleaseAudit": "release_store.audit.home",
    "ReplayReport": "release_store.audit.replay",
    "SignatureCheck": "release_store.audit.signing",
    "audit_home": "release_store.audit.home",
    "check_signature": "release_store.audit.signing",
    "home_public_keys": "release_store.audit.signing",
    "key_history": "release_store.audit.signing",
    "key_id": "release_store.audit.signing",
    "load_public_key": "release_store.audit.signing",
    "manifest_differences": "release_store.audit.replay",
    "public_pem": "release_store.audit.signing",
    "replay_parameters": "release_store.audit.replay",
    "report_path": "release_store.audit.home",
    "rotate_key": "release_store.audit.signing",
    "same_value": "release_store.audit.replay",
    "sign_release": "release_store.audit.signing",
    "signature_problems": "release_store.audit.home",
    "signing_key": "release_store.audit.signing",
    "verify_signed_release": "release_store.audit.signing",
}

__all__ = [
    "LOCAL_ONLY",
    "RUN_FACTS",
    "AuditReport",
    "Check",
    "RecordedRelease",
    "ReleaseAudit",
    "ReplayReport",
    "SignatureCheck",
    "audit_home",
    "check_signature",
    "home_public_keys",
    "key_history",
    "key_id",
    "load_public_key",
    "manifest_differences",
    "public_pem",
    "replay_parameters",
    "report_path",
    "rotate_key",
    "same_value",
    "sign_release",
    "signature_problems",
    "signing_key",
    "verify_signed_release",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from release_store.audit.home import (
        AuditReport,
        ReleaseAudit,
        audit_home,
        report_path,
        signature_problems,
    )
    from release_store.audit.replay import (
        LOCAL_ONLY,
        RUN_FACTS,
        Check,
        RecordedRelease,
        ReplayReport,
        manifest_differences,
        replay_parameters,
        same_value,
    )
    from release_store.audit.signing import (
        SignatureCheck,
        check_signature,
        home_public_keys,
        key_history,
        key_id,
        load_public_key,
        public_pem,
        rotate_key,
        sign_release,
        signing_key,
        verify_signed_release,
    )
