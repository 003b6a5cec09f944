"""Each parameter is declared once: ReleaseParams' form and docs/pipeline.md's tables come from the
core FieldSpecs, and a release has one default δ.

Run this file as a script to rewrite the generated tables of docs/pipeline.md.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sds_core.marginals.params import DpParams, release_delta
from sds_core.param_fields import field_specs
from sds_release.store import config as rp
from sds_release.store.config.core_objects import dp_params
from sds_release.store.config.doc_tables import config_table, core_table
from sds_release.store.config.fields import CORE_KEYS, RELEASE_OVERRIDES
from sds_release.store.config.release_params import ReleaseParams

PROJECT = Path(__file__).resolve().parents[3]
DOCS = PROJECT / "docs" / "pipeline.md"
TABLES = {"config_table": config_table, "core_table": core_table}
_BLOCK = r"(<!-- BEGIN {name} \(generated, do not edit\) -->\n)(.*?)(<!-- END {name} -->)"


def _json_bounds(prop: dict) -> dict:
    """The numeric bounds of a property (of its non-null branch when it is optional)."""
    branch = next(b for b in prop.get("anyOf", [prop]) if b.get("type") != "null")
    names = {"minimum": "ge", "exclusiveMinimum": "gt", "maximum": "le", "exclusiveMaximum": "lt"}
    return {names[k]: v for k, v in branch.items() if k in names}


def test_dp_fields_are_release_keys_with_the_core_declaration() -> None:
    """Every DpParams field a release sets is a ReleaseParams key whose JSON-schema default,
    bounds and description are the core FieldSpec's (the Prefect form shows the core texts)."""
    schema = ReleaseParams.model_json_schema()["properties"]
    dp_keys = {k for k, cls in CORE_KEYS.items() if cls is DpParams}
    assert dp_keys == {
        "epsilon",
        "delta",
        "reporting_length",
        "percentile_percentage",
        "percentile_epsilon_proportion",
        "number_of_records_epsilon_proportion",
    }
    for key, cls in CORE_KEYS.items():
        default, spec = field_specs(cls)[key]
        prop = schema[key]
        override = RELEASE_OVERRIDES.get(key, {})
        bounds = {
            b: getattr(spec, b) for b in ("ge", "gt", "le", "lt") if getattr(spec, b) is not None
        }
        bounds |= {k: v for k, v in override.items() if k in ("ge", "gt", "le", "lt")}
        assert _json_bounds(prop) == bounds, key
        assert prop["description"] == override.get("description", spec.description), key
        expected = override.get("default", default)
        assert prop.get("default", ()) == (expected if expected != () else ()), key


def test_release_overrides_are_the_three_documented_ones() -> None:
    """Only record_limit (>= 1), resolution (100) and reporting_length (empty: the SDS plan
    chooses it) differ from the core declarations."""
    assert set(RELEASE_OVERRIDES) == {"record_limit", "resolution", "reporting_length"}
    assert RELEASE_OVERRIDES["record_limit"] == {"ge": 1}
    assert RELEASE_OVERRIDES["resolution"] == {"default": 100}
    assert RELEASE_OVERRIDES["reporting_length"]["default"] is None
    p = ReleaseParams(input="x", dataset="d")
    assert p.resolution == 100 and p.reporting_length is None


def test_release_dp_params_equal_the_core_defaults() -> None:
    """A release with no DP keys set builds DpParams() with only δ made explicit."""
    p = ReleaseParams(input="x", dataset="d")
    assert dp_params(p) == DpParams(delta=release_delta(None))


@pytest.mark.parametrize("name", sorted(TABLES))
def test_docs_tables_are_generated(name: str) -> None:
    """docs/pipeline.md's tables equal the generated ones (run this file to rewrite them)."""
    found = re.search(_BLOCK.format(name=name), DOCS.read_text(encoding="utf-8"), re.S)
    assert found, f"docs/pipeline.md lacks the generated {name} block"
    assert found.group(2) == TABLES[name](), f"run `python {Path(__file__).name}` to update"


def test_core_table_lists_every_core_field_once() -> None:
    """Each core field appears either as a config key or in the core table, never both."""
    config, core = config_table(), core_table()
    for cls in rp.CORE_CLASSES:
        for name in field_specs(cls):
            in_config = CORE_KEYS.get(name) is cls
            assert (f"`{cls.__name__}.{name}`" in core) is not in_config, name
            assert (f"| `{name}` |" in config) or not in_config, name


@pytest.mark.parametrize(
    ("schema", "delta", "expected"),
    [
        (None, None, 1e-6),
        ({"columns": [{"name": "a"}]}, None, 1e-6),
        ({"columns": [{"name": "a"}], "max_rows": 2}, None, 1e-6),
        ({"columns": [{"name": "a"}], "max_rows": 1000}, None, 9.999999999999999e-05),
        ({"columns": [{"name": "a"}], "max_rows": 100_000}, None, 8.685889638065036e-07),
        ({"columns": [{"name": "a"}], "max_rows": 100_000}, 1e-7, 1e-7),
    ],
)
def test_one_default_delta(schema: dict | None, delta: float | None, expected: float) -> None:
    """resolved_delta is the given δ or release_delta(max_rows), with the exact values releases
    have always used (8.685889638065036e-07 is the example config's)."""
    p = ReleaseParams(input="x", dataset="d", table_schema=schema, delta=delta)
    assert p.resolved_delta() == expected
    assert dp_params(p).delta == expected  # the engine never falls back to its own default
    if delta is None:
        max_rows = p.table_schema.max_rows if p.table_schema else None
        assert expected == release_delta(max_rows)


def test_privacy_doc_states_the_default_delta_the_code_uses() -> None:
    """docs/privacy.md §1 gives the default δ as resolved_delta computes it: from the declared
    max_rows before any data is read (with its worked value, the cap's range and the value
    without a bound), never from a count of the data, noisy or not."""
    text = (PROJECT / "docs" / "privacy.md").read_text(encoding="utf-8")
    section = text.split("## 1. The guarantee", 1)[1].split("## 2.", 1)[0]
    bullet = section.split("* **Public inputs**", 1)[1].split("\n* ", 1)[0]
    flat = " ".join(bullet.split())
    params = ReleaseParams(input="x", dataset="d", table_schema={"columns": [{"name": "a"}]})
    with_bound = params.model_copy(
        update={"table_schema": params.table_schema.model_copy(update={"max_rows": 100_000})}
    )
    assert "`max_rows = 100000` gives δ" in flat
    assert f"δ = {with_bound.resolved_delta():.3g}" in flat
    assert f"without `max_rows` δ = {params.resolved_delta():.0e}".replace("e-0", "e-") in flat
    cap = max(n for n in range(3, 10_000) if release_delta(n) == release_delta(3))
    assert f"(N up to {cap:,})" in flat
    assert "noisy" not in flat.split("It depends on no count")[0]  # not derived from one


def test_delta_defaults_are_defined_in_one_place() -> None:
    """No module outside sds_core/marginals/params.py assigns a DEFAULT_DELTA, and no
    synthesizer's budget() or fit() gives δ a default value."""
    owners = []
    for path in sorted(
        [*PROJECT.glob("sds_core/**/*.py"), *PROJECT.glob("sds_release/store/*.py")]
    ):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and "DEFAULT_DELTA" == t.id for t in targets):
                    owners.append(path.relative_to(PROJECT).as_posix())
            if isinstance(node, ast.FunctionDef) and node.name in ("budget", "fit"):
                args = node.args
                defaults = dict(
                    zip([a.arg for a in args.kwonlyargs], args.kw_defaults, strict=True)
                )
                positional = [a.arg for a in args.args][len(args.args) - len(args.defaults) :]
                assert defaults.get("delta") is None and "delta" not in positional, path
    assert owners == ["sds_core/marginals/params.py"]


def _rewrite() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for name, make in TABLES.items():
        pattern = re.compile(_BLOCK.format(name=name), re.S)
        text = pattern.sub(lambda m, make=make: m.group(1) + make() + m.group(3), text)
    DOCS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    _rewrite()
