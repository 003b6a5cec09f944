"""``python -m sds_release``: the ``sds`` command."""

from sds_release.flows.cli import main

main()
