"""A deployed release's parameters: what a run may choose, what the pin file pins, and the
checks on the pin file and the config before anything is read or charged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from sds_core.errors import SdsInputError
from sds_release.store.config.deployment import (
    PIN_KEYS,
    PINNED,
    Pins,
    RunOptions,
    deployed_params,
    pin_path,
    read_pins,
    require_budget,
    write_pins,
)
from sds_release.store.config.release_params import (
    RECORDS_PER_MAX_ROW,
    SYNTHETIC_RECORDS_MAX,
    ReleaseParams,
)
from sds_release.store.ledger.book import Ledger
from tests.helpers import TINY_CONFIG

NEVER_FROM_A_RUN = {
    "seed",
    "release_id",
    "input",
    "config",
    "home",
    "ledger",
    "dataset",
    "subject_id",
    "table_schema",
    "delimiter",
    "record_limit",
    "use_columns",
    "executor",
    "dask_address",
    "default_budget",
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh home."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The tiny release config (it has a [budget] table), 0644."""
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_CONFIG)
    path.chmod(0o644)
    return path


def _pins(home: Path, config: Path, **extra: object) -> Pins:
    path = pin_path(home, "on-demand-tiny")
    write_pins(path, {"input": "/data/tiny.csv", "config": str(config), **extra}, "test")
    return read_pins(path)


def test_every_field_is_either_a_run_option_or_pinned() -> None:
    """RunOptions and PINNED split ReleaseParams; every field the brief keeps from runs is
    pinned, and a pin file may set neither the home, the seed, the release id nor a budget."""
    assert set(RunOptions.model_fields) | PINNED == set(ReleaseParams.model_fields)
    assert not set(RunOptions.model_fields) & PINNED
    assert NEVER_FROM_A_RUN <= PINNED
    assert {"epsilon", "delta", "reporting_length", "synthesizer", "synthesis"} <= set(
        RunOptions.model_fields
    )
    assert not {"home", "seed", "release_id", "default_budget"} & PIN_KEYS


def test_a_pin_file_may_ask_for_the_series(home: Path, config: Path) -> None:
    """``series = true`` is pinned (no run can set it) and is no release parameter; anything but
    true or false is refused, naming the file."""
    pins = _pins(home, config, series=True)
    assert pins.series and not _pins(home, config).series
    built = deployed_params(home, pins, RunOptions())
    assert "series" not in ReleaseParams.model_fields and built.params.dataset == "tiny"
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        RunOptions.model_validate({"series": True})
    path = pin_path(home, "on-demand-tiny")
    path.write_text(path.read_text() + 'series = "yes"\n')
    with pytest.raises(SdsInputError, match=r"series = 'yes' is not true or false"):
        read_pins(path)


@pytest.mark.parametrize("field", sorted(PINNED))
def test_a_run_option_naming_a_pinned_field_is_refused_by_name(field: str) -> None:
    """Every pinned field given as a run option is refused, the message naming it."""
    with pytest.raises(ValidationError, match=rf"'{field}' is pinned by the deployment"):
        RunOptions.model_validate({field: "x", "epsilon": 1.0})


def test_run_options_keep_the_release_bounds() -> None:
    """The form's bounds are ReleaseParams' (ε > 0), unknown keys are refused, empty = unset."""
    with pytest.raises(ValidationError, match="greater than 0"):
        RunOptions(epsilon=0)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        RunOptions.model_validate({"epsilonn": 1.0})
    assert RunOptions(epsilon=1.5).given() == {"epsilon": 1.5}
    schema = RunOptions.model_json_schema()
    assert schema["additionalProperties"] is False
    assert schema["properties"]["epsilon"]["anyOf"][0]["exclusiveMinimum"] == 0


def test_every_numeric_run_option_has_a_largest_value_stated_in_the_form() -> None:
    """Each number a run may set has an upper bound in the schema the server checks, and the
    description the Custom run form shows states it (no option is unbounded)."""
    schema = RunOptions.model_json_schema()["properties"]
    numeric = {k: v for k, v in schema.items() if v["anyOf"][0]["type"] in ("integer", "number")}
    assert {"synthetic_records", "resolution", "synthetic_part_records", "epsilon"} <= set(numeric)
    for key, prop in numeric.items():
        branch = prop["anyOf"][0]
        if "maximum" in branch:
            top = branch["maximum"]
            said = f"{top:,}" if isinstance(top, int) else f"{top:g}"
            assert prop["description"].endswith(f"Largest value: {said}."), key
        else:
            assert prop["description"].endswith(f"Must be below {branch['exclusiveMaximum']:g}.")
    assert schema["synthetic_records"]["anyOf"][0]["maximum"] == SYNTHETIC_RECORDS_MAX
    assert schema["resolution"]["anyOf"][0]["maximum"] == 10_000
    assert (
        f"at most {RECORDS_PER_MAX_ROW} times the schema's max_rows"
        in (schema["synthetic_records"]["description"])
    )


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("synthetic_records", 10**15),
        ("synthetic_records", SYNTHETIC_RECORDS_MAX + 1),
        ("resolution", 10**15),
        ("synthetic_part_records", 10**12),
    ],
)
def test_a_run_option_above_its_cap_is_refused(option: str, value: int) -> None:
    """10^15 synthetic records (or any option above its cap) is refused by the run options'
    validation, the server's and the flow's, before the pin file is even read."""
    with pytest.raises(ValidationError, match=rf"{option}\n.*less than or equal to"):
        RunOptions.model_validate({option: value})


def test_more_records_than_the_schema_allows_are_refused_before_any_charge(
    home: Path, config: Path
) -> None:
    """Below the absolute cap, synthetic_records above 10 x the pinned schema's max_rows
    (100,000 rows in the tiny config) is refused when the run's parameters are built: before
    the budget is checked, anything read or anything charged; 10 x max_rows itself passes."""
    Ledger.open(home).set_budget("tiny", epsilon=5, delta=1e-5)
    pins = _pins(home, config)
    allowed = deployed_params(home, pins, RunOptions(synthetic_records=1_000_000)).params
    assert allowed.synthetic_records == 1_000_000
    with pytest.raises(
        SdsInputError,
        match=r"synthetic_records = 1,000,001 is more than 10 times the schema's max_rows "
        r"\(100,000\).*nothing was read or charged",
    ):
        deployed_params(home, pins, RunOptions(synthetic_records=1_000_001))
    assert Ledger.open(home).charges() == [] and not (home / "releases").exists()


def test_deployed_params_config_then_pins_then_options(home: Path, config: Path) -> None:
    """The config fills the release, the pin file wins over it, the run's options win over
    both; the home is the deployment's, the [budget] is dropped with a note, no config path."""
    built = deployed_params(home, _pins(home, config, dataset="pinned"), RunOptions(epsilon=1.0))
    p = built.params
    assert (p.dataset, p.epsilon, p.reporting_length) == ("pinned", 1.0, 2)
    assert p.home == str(home) and p.input == "/data/tiny.csv"
    assert p.default_budget is None and p.config is None and p.seed is None
    assert any("[budget] is ignored" in n for n in built.notes)


def test_a_monthly_pin_file_pins_the_relative_period(home: Path, config: Path) -> None:
    """monthly-release.toml pins ``period = "previous-month"`` (a run cannot change it); the
    release flow resolves it from the run's scheduled start (test_relative_periods)."""
    config.write_text(TINY_CONFIG.replace("[budget]", 'period_column = "a"\n\n[budget]', 1))
    built = deployed_params(home, _pins(home, config, period="previous-month"), RunOptions())
    assert built.params.period == "previous-month" and "period" in PINNED
    with pytest.raises(ValidationError, match="'period' is pinned"):
        RunOptions.model_validate({"period": "2026-10"})


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("seed = 3", "sets 'seed': a deployed run is always a new release"),
        ('release_id = "r1"', "sets 'release_id'"),
        ('home = "/elsewhere"', "names the home '/elsewhere'"),
    ],
)
def test_a_config_may_not_fix_the_key_or_move_the_home(
    home: Path, config: Path, line: str, match: str
) -> None:
    """A deployment's config that fixes the seed or release id, or names another home, is
    refused before anything is read."""
    config.write_text(line + "\n" + TINY_CONFIG)
    with pytest.raises(SdsInputError, match=match):
        deployed_params(home, _pins(home, config), RunOptions())


def test_pin_file_written_private_and_read_back(home: Path, config: Path) -> None:
    """write_pins makes a 0600 file in a 0700 folder that read_pins reads back."""
    pins = _pins(home, config, use_columns=["a", "b"], record_limit=3)
    assert pins.values["use_columns"] == ["a", "b"] and pins.values["record_limit"] == 3
    assert (pins.path.stat().st_mode & 0o777, pins.path.parent.stat().st_mode & 0o777) == (
        0o600,
        0o700,
    )


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('input = "/d.csv"\nhome = "/x"\n', "sets 'home', which a pin file may not"),
        ('input = "/d.csv"\ndefault_budget = 3\n', "sets 'default_budget'"),
        ('input = "/d.csv"\nseed = 3\n', "sets 'seed'"),
        ('config = "/c.toml"\n', "names no input"),
        ('input = "d.csv"\n', "is not an absolute path"),
        ('input = "/d.csv"\nledger = "postgresql://u:pw@h/db"\n', "carries a password"),
        ("input = \n", "is not valid TOML"),
    ],
)
def test_bad_pin_files_are_refused(home: Path, text: str, match: str) -> None:
    """A pin file setting what it may not, without an input, with a relative path, a ledger
    password or bad TOML is refused with the reason."""
    path = pin_path(home, "d")
    path.parent.mkdir(mode=0o700)
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(SdsInputError, match=match):
        read_pins(path)


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o660])
def test_a_pin_file_others_can_write_is_refused(home: Path, config: Path, mode: int) -> None:
    """A pin file its group or other users can write is refused, naming the chmod fix."""
    pins = _pins(home, config)
    pins.path.chmod(mode)
    with pytest.raises(SdsInputError, match=r"writable by its group or by other users.*chmod go-w"):
        read_pins(pins.path)


def test_a_pin_folder_others_can_write_is_refused(home: Path, config: Path) -> None:
    """The folder is checked too: whoever can write it can replace the pin file."""
    pins = _pins(home, config)
    pins.path.parent.chmod(0o777)
    with pytest.raises(SdsInputError, match=r"the pin folder .* is writable"):
        read_pins(pins.path)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_pin_file_of_another_user_is_refused(home: Path, config: Path) -> None:
    """A pin file owned by another user is refused (as ssh refuses its config)."""
    pins = _pins(home, config)
    os.chown(pins.path, 4242, -1)
    with pytest.raises(SdsInputError, match=r"belongs to another user \(uid 4242\)"):
        read_pins(pins.path)


def test_a_config_others_can_write_is_refused(home: Path, config: Path) -> None:
    """The config the pin file names decides the schema and the dataset: same rule."""
    pins = _pins(home, config)
    config.chmod(0o666)
    with pytest.raises(SdsInputError, match=r"the config .* is writable by its group"):
        deployed_params(home, pins, RunOptions())


def test_a_config_is_checked_where_it_points_and_on_every_folder(
    home: Path, config: Path, tmp_path: Path
) -> None:
    """Issue #37: the pin file names a symlink to a config in a folder others can write (it
    could be pointed at another custodian's config): refused naming that folder and the fix;
    an input in such a folder too; both are fine once the folder is closed."""
    shared = tmp_path / "shared"
    shared.mkdir()
    config.rename(shared / "tiny.toml")
    config.symlink_to(shared / "tiny.toml")
    shared.chmod(0o775)
    pins = _pins(home, config)
    with pytest.raises(
        SdsInputError, match=rf"the folder {shared} on the path of the config .*chmod g-w {shared}"
    ):
        deployed_params(home, pins, RunOptions())
    shared.chmod(0o755)
    data = tmp_path / "data"
    data.mkdir(mode=0o777)
    data.chmod(0o777)
    pins = _pins(home, config, input=str(data / "tiny.csv"))
    with pytest.raises(SdsInputError, match=rf"the folder {data} on the path of the input"):
        deployed_params(home, pins, RunOptions())
    pins = _pins(home, config, input=str(data / "part-*.parquet"))
    with pytest.raises(SdsInputError, match=rf"the folder {data} on the path of the input"):
        deployed_params(home, pins, RunOptions())
    data.chmod(0o755)
    assert deployed_params(home, pins, RunOptions()).params.input.endswith("part-*.parquet")


def test_a_pin_file_under_a_folder_others_can_write_is_refused(
    home: Path, config: Path, tmp_path: Path
) -> None:
    """The folders above the home are on the pin file's path too."""
    pins = _pins(home, config)
    tmp_path.chmod(0o757)
    try:
        with pytest.raises(SdsInputError, match=rf"the folder {tmp_path} on the path of the pin"):
            read_pins(pins.path)
    finally:
        tmp_path.chmod(0o700)


def test_a_missing_pin_file_says_who_writes_it(home: Path) -> None:
    """No pin file: the message says to run sds deploy."""
    with pytest.raises(SdsInputError, match=r"no pin file .*run `sds deploy`"):
        read_pins(pin_path(home, "nightly"))


def test_no_budget_is_refused_and_none_is_created(home: Path, config: Path) -> None:
    """A deployed run of a dataset without a budget is refused, naming sds budget set, even
    though its config has a [budget]; the ledger still has no budget afterwards."""
    params = deployed_params(home, _pins(home, config), RunOptions()).params
    with pytest.raises(SdsInputError, match=r"never creates one.*sds budget set tiny"):
        require_budget(params)
    assert Ledger.open(home).budget("tiny") is None
    Ledger.open(home).set_budget("tiny", epsilon=5, delta=1e-5)
    require_budget(params)


def test_a_deployed_release_resumes_without_its_config(home: Path, config: Path) -> None:
    """The parameters kept for `sds resume` name no config: they read back the same after the
    config file has changed or gone."""
    params = deployed_params(home, _pins(home, config), RunOptions(epsilon=1.0)).params
    kept = params.private_dict()
    assert kept["config"] is None
    config.unlink()
    again = ReleaseParams.model_validate({**kept, "seed": None})
    assert again.private_dict() == kept
