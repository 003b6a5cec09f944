"""What every generated page shares to stay offline: the Content-Security-Policy that forbids
loading anything, and the CSS/JS templates shipped with the package (inlined by each page).

Light on purpose (no numpy, no release code): the report, the explorer, the series page and the
audit page all import it.
"""

from __future__ import annotations

from importlib import resources

__all__ = ["CSP", "template"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
"""Content-Security-Policy of the generated pages: nothing may be loaded from anywhere."""


def template(name: str, package: str = "sds_release.store.report") -> str:
    """A template file (CSS, JS) shipped in ``<package>/templates`` (default the report's)."""
    return (resources.files(package) / "templates" / name).read_text(encoding="utf-8")
