"""``python -m flows.cli``: the ``sds`` command."""

from flows.cli import main

main()
