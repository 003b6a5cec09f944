"""What every generated page shares to stay offline: the Content-Security-Policy that forbids
loading anything, the CSS/JS templates shipped with the package (inlined by each page), the
script the explorer and the series page share, and JSON made safe to embed in a page.

Light on purpose (no numpy, no release code): the report, the explorer, the series page and the
audit page all import it.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["CSP", "json_for_script", "page_scripts", "template"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
"""Content-Security-Policy of the generated pages: nothing may be loaded from anywhere."""


def template(name: str, package: str = "sds_release.store.report") -> str:
    """A template file (CSS, JS) shipped in ``<package>/templates`` (default the report's)."""
    return (resources.files(package) / "templates" / name).read_text(encoding="utf-8")


def page_scripts(name: str, package: str) -> str:
    """The ``<script>`` elements of an interactive page: ``templates/selectors.js`` (the
    formatting, escaping and column selectors the explorer and the series page share), then the
    page's own script ``name`` from ``<package>/templates``."""
    return f"<script>{template('selectors.js')}</script><script>{template(name, package)}</script>"


def json_for_script(obj: Any) -> str:
    """JSON that cannot close or confuse the ``<script>`` element it is embedded in."""
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
