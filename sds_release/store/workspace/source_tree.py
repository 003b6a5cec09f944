"""Where this code runs from: the folder that holds the ``sds_release`` package (a checkout's
root; site-packages when the wheel is installed). The one place it is computed: the warm
runner's identity and the home server's import path (``flows.local``) and anonymeter's
environment (``compare.risk``) all take it from here. Standard library only: the CLI's client
imports it before anything else.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["project_root"]


def project_root() -> str:
    """The folder that holds the ``sds_release`` package this code runs from."""
    return str(Path(__file__).resolve().parents[3])  # sds_release/store/workspace/source_tree.py
