"""``sds release``, ``sds resume`` and ``sds cancel``: start, continue or abandon a release.

The options of ``sds release`` are the fields of
:class:`~sds_release.store.config.release_params.ReleaseParams` (one declaration: the same name,
type and help as the config key and the Prefect form); the release itself runs through
:func:`sds_release.flows.local.launch.launch`.
"""

from __future__ import annotations

import inspect
import types
import typing
from pathlib import Path
from typing import Annotated, Any

import typer

from sds_release.flows.cli.common import (
    HomeOpt,
    LedgerOpt,
    QuietOpt,
    SdsTyper,
    VerboseOpt,
    csv_list,
    home_dir,
)
from sds_release.flows.local.launch import seeded_warning

__all__ = ["register", "release_options"]

NOT_OPTIONS = ("input", "table_schema", "default_budget", "home", "ledger")
"""ReleaseParams fields that are no ``sds release`` option: the argument INPUT, the structured
config sections (``[schema]``, ``[budget]``), and the options every command shares."""


def release_options() -> list[inspect.Parameter]:
    """One keyword option per ReleaseParams field (default None: the config or the field's
    default applies), typed for the command line, with the field's description as help."""
    from sds_release.store.config.release_params import ReleaseParams

    out = []
    for name, field in ReleaseParams.model_fields.items():
        if name in NOT_OPTIONS:
            continue
        kind = _cli_type(field.annotation)
        extra = " Comma-separated." if kind is list else ""
        cli: Any = str if kind is list else (Path if name == "config" else kind)
        option = typer.Option(help=(field.description or "") + extra, show_default=False)
        out.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[cli | None, option],
            )
        )
    return out


def _cli_type(annotation: Any) -> type:
    """str, int, float, bool or list for a field annotation (Literal and X | None unwrapped)."""
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _cli_type(args[0])
    if origin is typing.Literal:
        return type(typing.get_args(annotation)[0])
    if origin is list:
        return list
    if annotation in (str, int, float, bool):
        return annotation  # type: ignore[no-any-return]
    raise TypeError(f"ReleaseParams field type {annotation!r} has no command-line form")


def release(input: str, **options: Any) -> None:
    """Run one DP release of INPUT; prints the release directory last."""
    from sds_core.errors import SdsInputError
    from sds_release.store.config import build_params, load_config
    from sds_release.store.config.periods import resolve_period
    from sds_release.store.config.sources import is_local_path
    from sds_release.store.inputs.paths import check_input_path
    from sds_release.store.workspace.home import new_release_id

    home, ledger = options.pop("home"), options.pop("ledger")
    quiet, verbose = options.pop("quiet"), options.pop("verbose")
    config = options.pop("config")
    cfg = load_config(config) if config is not None else {}
    if "dataset" not in cfg and options.get("dataset") is None:
        raise SdsInputError("no dataset id: pass --dataset ID or set dataset in the config")
    for name in ("use_columns", "sensitive_zeros"):
        options[name] = csv_list(options.get(name))
    overrides = {
        **options,
        "home": home,
        "ledger": ledger,
        "input": str(Path(input).expanduser().absolute()) if is_local_path(input) else input,
    }
    params = resolve_period(build_params(cfg, overrides))  # previous-month: now, once
    if is_local_path(params.input):  # a database or objects are read (checked) by the pre-flight
        check_input_path(params.input)  # before any budget is reserved or Prefect started
    root = home_dir(params.home)
    params = params.model_copy(
        update={
            "home": str(root),
            "release_id": params.release_id or new_release_id(params.dataset),
        }
    )
    _run(params, root, quiet=quiet, verbose=verbose)


def _run(params: Any, root: Path, *, quiet: bool, verbose: bool) -> None:
    """The pre-flight, then the release (through the warm runner, whose child runs the
    pre-flight first, or here)."""
    from sds_release.flows.local.launch import launch

    launch(params, root, quiet=quiet, verbose=verbose, checks=True)


def resume(
    release_id: str,
    home: HomeOpt = None,
    ledger: LedgerOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Continue an unfinished release from its first unfinished stage (no double spend)."""
    from sds_release.flows.local.launch import launch
    from sds_release.store.run.resume import resume_params

    root = home_dir(home)
    params = resume_params(root, release_id, ledger)
    seeded_warning(params)
    launch(params, root, quiet=quiet, verbose=verbose)


def cancel(release_id: str, home: HomeOpt = None, ledger: LedgerOpt = None) -> None:
    """Abandon an unfinished release: keep what its drawn stages spent, return the rest."""
    from sds_release.store.ledger.book import Ledger
    from sds_release.store.workspace.home import find_release, validate_id
    from sds_release.store.workspace.manifest import discard_incomplete

    root = home_dir(home)
    validate_id(release_id)
    res = Ledger.open(root, ledger).cancel(release_id)
    found = find_release(root, release_id)
    if found is not None:
        discard_incomplete(found, reason="cancelled")
    typer.echo(
        f"cancelled {release_id}: spent ε={res.epsilon_spent:.6g} δ={res.delta_spent:.3g},"
        f" returned ε={res.epsilon_returned:.6g} δ={res.delta_returned:.3g}"
    )


def _release_signature() -> inspect.Signature:
    shared = [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a)
        for n, a, d in (
            ("home", HomeOpt, None),
            ("ledger", LedgerOpt, None),
            ("quiet", QuietOpt, False),
            ("verbose", VerboseOpt, False),
        )
    ]
    argument = inspect.Parameter(
        "input",
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        annotation=Annotated[
            str,
            typer.Argument(
                metavar="INPUT",
                help="Sensitive table: CSV (header row) or Parquet file, Parquet dataset "
                "(directory or glob), postgresql://USER@HOST[:PORT]/DB with --table or "
                "--query, or s3://BUCKET/PREFIX/ (Parquet objects; a glob, a list, or one CSV "
                "or Parquet object; keys from AWS_* variables or a profile).",
            ),
        ],
    )
    return inspect.Signature([argument, *release_options(), *shared])


def register(app: SdsTyper) -> None:
    """Add ``release``, ``resume`` and ``cancel`` to ``app``."""
    signature = _release_signature()
    release.__signature__ = signature  # type: ignore[attr-defined]
    release.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    app.command()(release)
    app.command()(resume)
    app.command()(cancel)
