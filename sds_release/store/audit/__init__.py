"""Checking releases after the fact: the home's audit, replaying a release, signatures.

- ``home``: ``sds audit``: every release of a home, with integrity checks;
- ``replay``: ``sds audit --replay``: what a release recorded and the byte comparison;
- ``signing``: the home's Ed25519 key, ``manifest.sig`` and ``sds verify``;
- ``journal``: the private run journal (who or what started each run, the refused releases);
- ``trail``: every release and refusal with its spend, budget before and after, checks now;
- ``page``: ``sds audit --report``, the trail as one private HTML page.

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "AuditReport": "sds_release.store.audit.home",
    "AuditTrail": "sds_release.store.audit.trail",
    "Check": "sds_release.store.audit.comparison",
    "DatasetTotals": "sds_release.store.audit.trail",
    "JournalEntry": "sds_release.store.audit.journal",
    "LOCAL_ONLY": "sds_release.store.audit.comparison",
    "RUN_FACTS": "sds_release.store.audit.comparison",
    "RecordedRelease": "sds_release.store.audit.replay",
    "ReleaseAudit": "sds_release.store.audit.home",
    "ReplayReport": "sds_release.store.audit.comparison",
    "RunOrigin": "sds_release.store.audit.journal",
    "SignatureCheck": "sds_release.store.audit.signing",
    "TrailEntry": "sds_release.store.audit.trail",
    "audit_home": "sds_release.store.audit.home",
    "audit_page_html": "sds_release.store.audit.page",
    "audit_trail": "sds_release.store.audit.trail",
    "check_signature": "sds_release.store.audit.signing",
    "default_report_path": "sds_release.store.audit.page",
    "home_public_keys": "sds_release.store.audit.signing",
    "journal_path": "sds_release.store.audit.journal",
    "key_history": "sds_release.store.audit.signing",
    "key_id": "sds_release.store.audit.signing",
    "load_public_key": "sds_release.store.audit.signing",
    "manifest_differences": "sds_release.store.audit.comparison",
    "note_refusal": "sds_release.store.audit.journal",
    "note_refused": "sds_release.store.audit.journal",
    "note_start": "sds_release.store.audit.journal",
    "public_pem": "sds_release.store.audit.signing",
    "read_journal": "sds_release.store.audit.journal",
    "replay_parameters": "sds_release.store.audit.comparison",
    "report_path": "sds_release.store.audit.home",
    "rotate_key": "sds_release.store.audit.signing",
    "same_value": "sds_release.store.audit.comparison",
    "sign_release": "sds_release.store.audit.signing",
    "signature_problems": "sds_release.store.audit.home",
    "signing_key": "sds_release.store.audit.signing",
    "user_at_host": "sds_release.store.audit.journal",
    "verify_signed_release": "sds_release.store.audit.signing",
    "write_audit_page": "sds_release.store.audit.page",
}

__all__ = [
    "LOCAL_ONLY",
    "RUN_FACTS",
    "AuditReport",
    "AuditTrail",
    "Check",
    "DatasetTotals",
    "JournalEntry",
    "RecordedRelease",
    "ReleaseAudit",
    "ReplayReport",
    "RunOrigin",
    "SignatureCheck",
    "TrailEntry",
    "audit_home",
    "audit_page_html",
    "audit_trail",
    "check_signature",
    "default_report_path",
    "home_public_keys",
    "journal_path",
    "key_history",
    "key_id",
    "load_public_key",
    "manifest_differences",
    "note_refusal",
    "note_refused",
    "note_start",
    "public_pem",
    "read_journal",
    "replay_parameters",
    "report_path",
    "rotate_key",
    "same_value",
    "sign_release",
    "signature_problems",
    "signing_key",
    "user_at_host",
    "verify_signed_release",
    "write_audit_page",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from sds_release.store.audit.comparison import (
        LOCAL_ONLY,
        RUN_FACTS,
        Check,
        ReplayReport,
        manifest_differences,
        replay_parameters,
        same_value,
    )
    from sds_release.store.audit.home import (
        AuditReport,
        ReleaseAudit,
        audit_home,
        report_path,
        signature_problems,
    )
    from sds_release.store.audit.journal import (
        JournalEntry,
        RunOrigin,
        journal_path,
        note_refusal,
        note_refused,
        note_start,
        read_journal,
        user_at_host,
    )
    from sds_release.store.audit.page import audit_page_html, default_report_path, write_audit_page
    from sds_release.store.audit.replay import RecordedRelease
    from sds_release.store.audit.signing import (
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
    from sds_release.store.audit.trail import AuditTrail, DatasetTotals, TrailEntry, audit_trail
