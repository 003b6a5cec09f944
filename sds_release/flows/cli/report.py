"""``sds report RELEASE_ID [--open]``: the path of a complete release's report.html."""

from __future__ import annotations

from typing import Annotated

import typer

from sds_release.flows.cli.common import HomeOpt, fail, home_dir

__all__ = ["report_command"]


def report_command(
    release_id: Annotated[str, typer.Argument(help="The release id (see `sds audit`).")],
    open_it: Annotated[
        bool, typer.Option("--open", help="Also open the report in the default browser.")
    ] = False,
    home: HomeOpt = None,
) -> None:
    """Print the path of a complete release's report.html (--open: open it in a browser)."""
    from sds_release.store.audit.home import report_path

    path = report_path(home_dir(home), release_id)
    if open_it:
        import webbrowser

        if not webbrowser.open(path.as_uri()):
            typer.echo(path)
            raise fail(f"no browser could be started to open {path}; open the file yourself", 1)
    typer.echo(path)
