"""What every ``sds`` command shares: its options, the error handling, the home, the output.

:class:`SdsTyper` wraps every command it registers so that a caller mistake
(:class:`~sds_core.errors.SdsInputError`) becomes the one-paragraph message on stderr and exit
status 2, written once here instead of in every command, and runs it with the umask 077 (what
any command writes is private to its owner).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from sds_release.flows.console import fail, print_table, stdout_console, warn

__all__ = [
    "HomeOpt",
    "JsonOpt",
    "LedgerOpt",
    "QuietOpt",
    "SdsTyper",
    "VerboseOpt",
    "csv_list",
    "echo_json",
    "fail",
    "home_dir",
    "input_errors",
    "print_table",
    "private_files",
    "published_release",
    "stdout_console",
    "warn",
]

F = TypeVar("F", bound=Callable[..., Any])

HomeOpt = Annotated[
    str | None, typer.Option("--home", help="SDS home (default $SDS_HOME or ./.sds).")
]
LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Ledger URL: sqlite:///PATH or postgresql://USER@HOST/DB (default "
        "$SDS_LEDGER_URL, else HOME/ledger.sqlite).",
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Show the run's stage logs on stderr (they always go to Prefect)."
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def input_errors(command: F) -> F:
    """``command`` with every :class:`SdsInputError` it raises turned into the one-paragraph
    message and exit status 2 (the release contract's rule for a caller's mistake)."""

    @functools.wraps(command)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        from sds_core.errors import SdsInputError

        try:
            return command(*args, **kwargs)
        except SdsInputError as e:
            raise fail(str(e), 2) from None

    return wrapped  # type: ignore[return-value]


def private_files(command: F) -> F:
    """``command`` run with the umask 077: whatever it creates (in the home, or an output it
    is given) is 0600, its folders 0700, whatever the caller's umask (docs/hardening.md)."""

    @functools.wraps(command)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        from sds_release.store.workspace.home import private_umask

        with private_umask():
            return command(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


class SdsTyper(typer.Typer):
    """A typer app whose commands all go through :func:`input_errors` and
    :func:`private_files`."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("no_args_is_help", True)
        kwargs.setdefault("add_completion", False)
        kwargs.setdefault("pretty_exceptions_enable", False)
        super().__init__(**kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:
        """Register a command (as typer does), wrapped by :func:`input_errors`."""
        register = super().command(*args, **kwargs)

        def decorator(f: F) -> F:
            register(input_errors(private_files(f)))
            return f

        return decorator


def csv_list(value: str | None) -> list[str] | None:
    """``a,b , c`` -> ``["a", "b", "c"]``; None stays None."""
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def home_dir(home: str | None) -> Path:
    """The SDS home of ``--home`` (else $SDS_HOME, else ./.sds), created, checked and private:
    a home the user made (0755 under the umask 022) is made 0700, with its Prefect server's
    files, saying so in one warning line, whichever command meets it first (a release without
    a lasting server starts none, which would otherwise be where that happens)."""
    from sds_release.flows.local.server import make_home_private
    from sds_release.store.workspace.home import resolve_home

    root = resolve_home(home)
    note = make_home_private(root)
    if note is not None:
        warn(note)
    return root


def published_release(root: Path, release_id: str) -> Path:
    """The directory of release ``release_id`` under the home's ``releases/``.

    Raises:
        SdsInputError: no such release (the message names the home).
    """
    from sds_core.errors import SdsInputError
    from sds_release.store.workspace.home import find_release

    found = find_release(root, release_id)
    if found is None:
        raise SdsInputError(f"no published release {release_id!r} in {root / 'releases'}")
    return found


def echo_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON (what every ``--json`` prints)."""
    typer.echo(json.dumps(obj, indent=2, default=str))
