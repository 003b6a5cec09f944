"""A deployed release's parameters, split by who may change them.

A run of a deployment (Prefect UI, API, schedule) chooses only :class:`RunOptions`: ε, δ and
the other DP and synthesis knobs. Everything that decides whose data is read and whose budget
pays (input, config, dataset, schema, home, ledger, ...: :data:`PINNED`) comes from the
deployment's pin file, ``$SDS_HOME/deployments/<deployment>.toml``, written by the custodian
(``sds deploy``) and read on the worker. A deployed run never creates a lifetime budget.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sds_core.errors import SdsInputError, SdsInternalError
from sds_release.store.config.fields import SynthesizerName
from sds_release.store.config.loading import load_config
from sds_release.store.config.release_params import ReleaseParams, build_params
from sds_release.store.config.sources import is_postgres_url
from sds_release.store.ledger.backends import split_password
from sds_release.store.storage.urls import is_object_url
from sds_release.store.workspace.files import atomic_write_text
from sds_release.store.workspace.home import HOME_ENV, resolve_home, validate_id
from sds_release.store.workspace.writers import check_path_writers

__all__ = [
    "PINNED",
    "PIN_DIR",
    "PIN_KEYS",
    "SERIES_PIN",
    "DeployedRelease",
    "Pins",
    "RunOptions",
    "deployed_params",
    "deployment_home",
    "pin_path",
    "read_pins",
    "require_budget",
    "write_pins",
]

PIN_DIR = "deployments"
"""The folder of the home holding one pin file per deployment."""


def _option(name: str) -> Any:
    """The pydantic Field of run option ``name``: empty by default (= the deployment's value),
    with ReleaseParams' description and bounds, so the server checks them at submission; a
    numeric option's description ends with its largest value (the Custom run form shows it)."""
    info = ReleaseParams.model_fields[name]
    bounds = {
        attr: getattr(m, attr)
        for m in info.metadata
        for attr in ("gt", "ge", "lt", "le")
        if getattr(m, attr, None) is not None
    }
    doc = f"{info.description} Empty: the value of the deployment's config."
    if "le" in bounds:
        doc += f" Largest value: {_number(bounds['le'])}."
    elif "lt" in bounds:
        doc += f" Must be below {_number(bounds['lt'])}."
    return Field(None, description=doc, **bounds)


def _number(value: float) -> str:
    """A bound as the form says it: ``100,000,000``, ``1``, ``0.5``."""
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


class RunOptions(BaseModel):
    """What a run of a deployment may choose; every field left empty takes the deployment's
    config value. The Prefect UI renders this model as the Custom run form.

    ε and δ are bounded by the dataset's lifetime budget and per-release policy in the ledger;
    none of these fields changes which data is read or which budget pays.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    epsilon: float | None = _option("epsilon")
    delta: float | None = _option("delta")
    reporting_length: int | None = _option("reporting_length")
    synthesizer: SynthesizerName | None = _option("synthesizer")
    synthesis: Literal["records", "model"] | None = _option("synthesis")
    synthetic_records: int | None = _option("synthetic_records")
    reconcile_one_way: bool | None = _option("reconcile_one_way")
    resolution: int | None = _option("resolution")
    percentile_percentage: int | None = _option("percentile_percentage")
    percentile_epsilon_proportion: float | None = _option("percentile_epsilon_proportion")
    number_of_records_epsilon_proportion: float | None = _option(
        "number_of_records_epsilon_proportion"
    )
    binning_epsilon_proportion: float | None = _option("binning_epsilon_proportion")
    synthetic_part_records: int | None = _option("synthetic_part_records")

    @model_validator(mode="before")
    @classmethod
    def _no_pinned_field(cls, data: Any) -> Any:
        if isinstance(data, dict):
            pinned = sorted(k for k in data if k in PINNED)
            if pinned:
                one = len(pinned) == 1
                raise ValueError(
                    f"{', '.join(repr(k) for k in pinned)} {'is' if one else 'are'} pinned by "
                    f"the deployment (its pin file {HOME_ENV}/{PIN_DIR}/<deployment>.toml, "
                    "written by the custodian with `sds deploy`); a run cannot change "
                    f"{'it' if one else 'them'}: remove {'it' if one else 'them'} from the "
                    "run's parameters"
                )
        return data

    def given(self) -> dict[str, Any]:
        """The options this run set (the rest come from the deployment's config)."""
        return self.model_dump(exclude_none=True)


PINNED = frozenset(ReleaseParams.model_fields) - frozenset(RunOptions.model_fields)
"""ReleaseParams fields no run can set: they come from the pin file and the config it names.
Every field added to ReleaseParams is pinned until it is added to RunOptions."""

SERIES_PIN = "series"
"""A pin file's ``series = true``: after each release, the deployment rebuilds the dataset's
series up to the period released (``sds series``); not a release parameter."""

PIN_KEYS = (PINNED - {"home", "seed", "release_id", "default_budget"}) | {SERIES_PIN}
"""What a pin file may set: the pinned fields but the home (where the pin file is), the seed
and release id (every run is a new release with a fresh key) and budgets (``sds budget set``),
plus :data:`SERIES_PIN`. Keys it does not set come from the config it names."""

_NEVER_IN_CONFIG = ("seed", "release_id")


@dataclass(frozen=True, slots=True)
class Pins:
    """The pinned settings of one deployment: its pin file, parsed and checked."""

    path: Path
    values: dict[str, Any]

    @property
    def config(self) -> str | None:
        """The release config the pin file names (absolute), if any."""
        value = self.values.get("config")
        return None if value is None else str(value)

    @property
    def series(self) -> bool:
        """Whether each run rebuilds the dataset's series after its release."""
        return self.values.get(SERIES_PIN) is True


@dataclass(frozen=True, slots=True)
class DeployedRelease:
    """A deployed run's ReleaseParams and what it noted while building them."""

    params: ReleaseParams
    notes: tuple[str, ...]


def deployment_home() -> Path:
    """The home of a deployed run: ``$SDS_HOME``, set by the deployment's work pool.

    Raises:
        SdsInputError: ``SDS_HOME`` is not set (a work pool not made by ``sds deploy``).
    """
    given = os.environ.get(HOME_ENV)
    if not given:
        raise SdsInputError(
            f"this run has no {HOME_ENV}: a deployed release takes its home from its work "
            "pool's environment; create the pool with `sds deploy --home DIR` (or --pool NAME)"
        )
    return resolve_home(given)


def pin_path(home: Path, deployment: str) -> Path:
    """``<home>/deployments/<deployment>.toml``: the pin file of a deployment."""
    validate_id(deployment, "deployment name")
    return home / PIN_DIR / f"{deployment}.toml"


def _check_private(path: Path, what: str, *, root_ok: bool = False) -> None:
    """Refuse ``path`` unless this user (or root, with ``root_ok``) owns it and neither its
    group nor other users can write it, as ssh checks its configuration files."""
    st = path.stat()
    owners = (os.geteuid(), 0) if root_ok else (os.geteuid(),)
    if st.st_uid not in owners:
        raise SdsInputError(
            f"{what} {path} belongs to another user (uid {st.st_uid}), not to the user running "
            f"this release (uid {os.geteuid()}); whoever owns it decides what is released: "
            "write it as this user (`sds deploy` does)"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SdsInputError(
            f"{what} {path} is writable by its group or by other users (mode "
            f"{stat.S_IMODE(st.st_mode):o}); anyone who can write it decides what is released: "
            f"run `chmod go-w {path}`"
        )


def read_pins(path: Path) -> Pins:
    """Read and check a pin file: owned by this user, writable by nobody else, in a folder
    that is too; only :data:`PIN_KEYS`, with absolute ``input`` and ``config`` paths.

    Raises:
        SdsInputError: the file is missing, unsafe, not TOML or sets a key it may not.
    """
    if not path.is_file():
        raise SdsInputError(
            f"no pin file {path}: this deployment's settings are missing; run `sds deploy` "
            f"with the home {path.parent.parent} as the custodian"
        )
    _check_private(path.parent, "the pin folder")
    _check_private(path, "the pin file")
    check_path_writers([path], "the pin file")
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SdsInputError(f"pin file {path} is not valid TOML: {e}; fix the file") from e
    bad = sorted(set(values) - PIN_KEYS)
    if bad:
        raise SdsInputError(
            f"pin file {path} sets {', '.join(repr(k) for k in bad)}, which a pin file may not "
            f"(it may set {', '.join(sorted(PIN_KEYS))}; budgets come from `sds budget set`)"
        )
    if "input" not in values:
        raise SdsInputError(f'pin file {path} names no input; add input = "/path/to/table"')
    for key in ("input", "config"):
        value = values.get(key)
        if (
            value is not None
            and not (key == "input" and is_object_url(str(value)))
            and (not isinstance(value, str) or not Path(value).is_absolute())
        ):
            raise SdsInputError(
                f"pin file {path}: {key} = {value!r} is not an absolute path; the worker runs "
                "in a temporary directory, so give the full path"
            )
    if not isinstance(values.get(SERIES_PIN, False), bool):
        raise SdsInputError(
            f"pin file {path}: {SERIES_PIN} = {values[SERIES_PIN]!r} is not true or false"
        )
    ledger = values.get("ledger")
    if isinstance(ledger, str) and split_password(ledger)[1] is not None:
        raise SdsInputError(
            f"pin file {path}: the ledger URL carries a password; keep it in PGPASSWORD or "
            "~/.pgpass of the worker's user instead"
        )
    return Pins(path, values)


def _toml_value(value: Any) -> str:
    """A TOML literal for a string, number, boolean or list of them (pin files hold no more)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return json.dumps(value)  # a JSON string or number is a valid TOML one
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise SdsInternalError(f"a pin file cannot hold {type(value).__name__} values")


def write_pins(path: Path, values: dict[str, Any], header: str) -> Path:
    """Write a pin file (0600, atomically) holding ``values``, under the comment ``header``.

    Raises:
        SdsInputError: a key a pin file may not set.
    """
    bad = sorted(set(values) - PIN_KEYS)
    if bad:
        raise SdsInputError(f"a pin file may not set {', '.join(repr(k) for k in bad)}")
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{key} = {_toml_value(v)}" for key, v in sorted(values.items()) if v is not None]
    text = "\n".join(lines) + "\n"
    if tomllib.loads(text) != {k: v for k, v in values.items() if v is not None}:
        raise SdsInternalError(f"pin file text does not read back as written: {text!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    return atomic_write_text(path, text, private=True)


def deployed_params(home: Path, pins: Pins, options: RunOptions) -> DeployedRelease:
    """The ReleaseParams of a deployed run: the config the pins name, then the pins, then the
    run's options; home from the deployment, no budget creation, no seed or release id.

    The result names no config file: its values are all written out, so ``sds resume``
    continues it with exactly these parameters whatever happens to the config later.

    Raises:
        SdsInputError: the config is unsafe or sets what a deployment may not; a folder on
            the config's or the input's path can be written by someone other than this user or
            root; a value breaks a rule (the message names the parameter).
    """
    notes: list[str] = []
    cfg: dict[str, Any] = {}
    if pins.config is not None:
        config = Path(pins.config)
        if config.is_file():
            _check_private(Path(os.path.realpath(config)), "the config", root_ok=True)
        cfg = load_config(config)  # checks the folders on its path
        for key in _NEVER_IN_CONFIG:
            if cfg.get(key) is not None:
                raise SdsInputError(
                    f"config {config} sets {key!r}: a deployed run is always a new release "
                    f"with a fresh key; remove {key} from the config"
                )
        if cfg.get("home") is not None and Path(cfg["home"]).expanduser().resolve() != home:
            raise SdsInputError(
                f"config {config} names the home {cfg['home']!r}, but this deployment's home "
                f"is {home} (its work pool's {HOME_ENV}); remove home from the config"
            )
        if cfg.pop("default_budget", None) is not None:
            notes.append(
                "the config's [budget] is ignored: a deployed run never creates a lifetime "
                "budget (the custodian sets it with `sds budget set`)"
            )
        cfg.pop("config", None)
    pinned = {k: v for k, v in pins.values.items() if k not in ("config", SERIES_PIN)}
    merged = {**cfg, **pinned, **options.given(), "home": str(home)}
    params = build_params(merged, {})
    if not is_postgres_url(params.input):
        check_path_writers([_fixed_folders(params.input)], "the input")
    return DeployedRelease(params, tuple(notes))


def _fixed_folders(source: str) -> Path:
    """An input path up to its first glob pattern (the folders every part file is under)."""
    parts = Path(source).parts
    fixed = list(itertools.takewhile(lambda p: not any(c in p for c in "*?["), parts))
    return Path(*fixed)


def require_budget(params: ReleaseParams) -> None:
    """Refuse a deployed run whose dataset has no lifetime budget in the ledger yet.

    Raises:
        SdsInputError: no budget; the message says who sets one and how.
    """
    from sds_release.store.ledger.book import Ledger

    dataset = params.dataset or ""
    if Ledger.open(resolve_home(params.home), params.ledger).budget(dataset) is None:
        raise SdsInputError(
            f"dataset {dataset!r} has no lifetime budget in the ledger, and a deployed run "
            "never creates one (a config's [budget] is ignored here): the custodian sets it "
            f"with `sds budget set {dataset} --epsilon E --delta D --home {params.home}`"
        )
