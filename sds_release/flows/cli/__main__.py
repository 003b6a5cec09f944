"""``python -m sds_release.flows.cli``: the ``sds`` command."""

from sds_release.flows.cli import main

main()
