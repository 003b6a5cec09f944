"""`sds evaluate --privacy-risk`: anonymeter's attack-based risks of synthetic records (NOT DP).

Three attacks on the synthetic records (singling out, linkability, attribute inference), each
run against the training rows (those the release used) and against control rows held back
before it (`sds split`): the risk is how much better the attack does on the training rows,
with its confidence interval. anonymeter runs in its own environment (``make anonymeter``):
this module prepares the three tables as the release did, writes them to a private temporary
directory (0700, files 0600, removed afterwards) and runs :mod:`anonymeter_job` there as a
subprocess, job and result as JSON on stdin/stdout. Nothing of the data reaches a log; the
result is for the data owner and never published. A release with ``privacy_risk = true``
runs the same attacks in its evaluate stage (:func:`release_risks`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sds_core.errors import SdsInputError, SdsInternalError
from sds_release.store.workspace.source_tree import project_root

if TYPE_CHECKING:
    from sds_core.data.table import PreparedTable
    from sds_release.store.run.release_run import ReleaseRun

__all__ = [
    "ANONYMETER_PYTHON_ENV",
    "RISK_LABEL",
    "RiskParams",
    "anonymeter_python",
    "privacy_risk",
    "release_risks",
    "risk_summary_lines",
    "table_risks",
]

ANONYMETER_PYTHON_ENV = "SDS_ANONYMETER_PYTHON"
"""Environment variable naming the Python of anonymeter's environment (default: the
project's ``.venv-anonymeter/bin/python``, made by ``make anonymeter``)."""

_JOB = Path(__file__).with_name("anonymeter_job.py")


@dataclasses.dataclass(frozen=True, slots=True)
class RiskParams:
    """The attacks' settings.

    Attributes:
        n_attacks: targets per attack (capped by the training and control sizes); the
            interval of each risk narrows as 1/√n_attacks.
        seed: seed of the attacks' random choices (targets, singling-out queries).
        confidence_level: of every interval.
        singling_out_columns: attributes per multivariate singling-out query.
        n_neighbors: synthetic neighbours a linkability attack may match.
        link_columns: the attacker's first view in the linkability attack (the second is the
            other columns); empty: the first half of the columns.
        secrets: the columns the inference attack guesses from all the others; empty: each
            column with more than one value in the training rows, in turn.
        n_jobs: worker processes of the neighbour searches.
        max_attempts: most random queries the singling-out attack tries to find its
            ``n_attacks`` queries that single out one synthetic record (anonymeter's default,
            10 million, ran for over ten minutes on 600 rows whose synthetic records have few
            unique values; with fewer queries found the attack reports fewer attacks and a
            wider interval, and anonymeter says so in its warnings).
    """

    n_attacks: int = 500
    seed: int = 0
    confidence_level: float = 0.95
    singling_out_columns: int = 3
    n_neighbors: int = 1
    link_columns: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    n_jobs: int = 1
    max_attempts: int = 20_000

    def __post_init__(self) -> None:
        for name in ("n_attacks", "singling_out_columns", "n_neighbors", "n_jobs", "max_attempts"):
            if getattr(self, name) < 1:
                raise SdsInputError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 < self.confidence_level < 1.0:
            raise SdsInputError(
                f"confidence_level must be in (0, 1), got {self.confidence_level}; e.g. 0.95"
            )


def anonymeter_python() -> Path:
    """The Python of anonymeter's environment.

    Raises:
        SdsInputError: it is missing (the message says ``make anonymeter``).
    """
    named = os.environ.get(ANONYMETER_PYTHON_ENV)
    python = Path(named) if named else Path(project_root()) / ".venv-anonymeter" / "bin" / "python"
    if not python.exists():
        raise SdsInputError(
            f"the privacy-risk evaluation runs anonymeter in its own environment, and "
            f"{python} does not exist: run `make anonymeter` in the project (it pins "
            f"anonymeter 1.1.0 in .venv-anonymeter), or set {ANONYMETER_PYTHON_ENV} to a "
            "Python that has it"
        )
    return python


def _columns(params: RiskParams, columns: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The linkability views and the inference secrets, checked against the columns."""
    for name in (*params.link_columns, *params.secrets):
        if name not in columns:
            raise SdsInputError(
                f"column {name!r} (a link column or secret) is not a column of the prepared "
                f"tables: {columns}"
            )
    if len(columns) < 2:
        raise SdsInputError(
            f"the privacy-risk attacks need at least 2 columns, the tables have {columns}"
        )
    left = list(params.link_columns) or columns[: len(columns) // 2]
    right = [c for c in columns if c not in left]
    if not right:
        raise SdsInputError("--link-columns names every column: leave some for the other view")
    return left, right, list(params.secrets) or columns


def _text(table: PreparedTable, columns: list[str], name: str) -> Any:
    """``table`` as an Arrow table of strings in ``columns``' order (empty cells: "")."""
    from sds_core.data.decoding import to_arrow

    arrow = to_arrow(table, empty_value="")
    missing = [c for c in columns if c not in arrow.column_names]
    if missing:
        raise SdsInputError(
            f"the {name} table has no column {missing} of the original's {columns}: give the "
            "files of one release (and its --config)"
        )
    return arrow.select(columns)


def privacy_risk(
    original: str | Path,
    synthetic: str | Path,
    control: str | Path,
    *,
    params: RiskParams = RiskParams(),
    config: str | Path | None = None,
    delimiter: str | None = None,
) -> dict[str, Any]:
    """anonymeter's risks of ``synthetic`` (made from ``original``) against ``control``.

    Args:
        original: the training rows the release used (e.g. ``sds split``'s training file).
        synthetic: the release's synthetic records.
        control: rows of the same population held back before the release.
        params: the attacks' settings.
        config: the release's config: the three tables are prepared as the release did.
        delimiter: CSV delimiter of the files (default: the config's, else ``,``).

    Returns:
        ``{"differentially_private": False, "note", "anonymeter", "params", "records",
        "singling_out": {"univariate", "multivariate"}, "linkability", "inference":
        {secret: ...}, "inference_max"}``; every risk has ``risk``, ``ci``, the attack,
        baseline and control rates and ``informative`` (the attack beat random guessing).

    Raises:
        SdsInputError: unreadable files, different columns, a side smaller than
            :data:`~sds_release.store.inputs.holdback.MIN_SIDE_ROWS`, or no anonymeter environment.
    """
    from sds_release.store.compare.tables import reading

    anonymeter_python()
    how = reading(config, original, delimiter)
    training, prep = how.prepare_original(original)
    held_back, _ = how.prepare_original(control)
    synth = how.prepare_synthetic(synthetic, prep)
    if synth.n_records == 0:
        raise SdsInputError(f"the synthetic file {synthetic} has no records to attack")
    result = table_risks(training, held_back, synth, params=params)
    result["params"]["config"] = None if config is None else str(config)
    return result


def table_risks(
    training: PreparedTable,
    control: PreparedTable,
    synthetic: PreparedTable,
    *,
    params: RiskParams = RiskParams(),
) -> dict[str, Any]:
    """anonymeter's risks of ``synthetic`` (made from ``training``) against ``control``, the
    three tables prepared alike (compared by their decoded text, so their codes may differ).

    Returns and raises as :func:`privacy_risk` (without ``params.config``).
    """
    from sds_core.evaluation.metrics import NOT_DP_NOTE
    from sds_release.store.inputs.holdback import check_side_sizes
    from sds_release.store.workspace.files import atomic_write_parquet

    python = anonymeter_python()
    check_side_sizes(training.n_records, control.n_records)
    if synthetic.n_records == 0:
        raise SdsInputError("the synthetic table has no records to attack")
    columns = list(training.domain.columns)
    left, right, secrets = _columns(params, columns)
    if not params.secrets:  # a column with one value is guessed right by anyone: no secret
        one = {c for c, k in zip(columns, training.domain.cardinalities, strict=True) if k < 2}
        secrets = [c for c in secrets if c not in one] or secrets
    tables = {
        "training": _text(training, columns, "training"),
        "control": _text(control, columns, "control"),
        "synthetic": _text(synthetic, columns, "synthetic"),
    }
    n_attacks = min(params.n_attacks, training.n_records, control.n_records)
    job: dict[str, Any] = {
        "seed": params.seed,
        "confidence_level": params.confidence_level,
        "n_attacks": n_attacks,
        "n_jobs": params.n_jobs,
        "singling_out_columns": min(params.singling_out_columns, len(columns)),
        "n_neighbors": params.n_neighbors,
        "max_attempts": params.max_attempts,
        "link_columns": [left, right],
        "secrets": secrets,
    }
    private = Path(tempfile.mkdtemp(prefix="sds-risk-"))  # 0700
    try:
        for name, table in tables.items():
            job[name] = str(atomic_write_parquet(private / f"{name}.parquet", table, private=True))
        outcome = _run_job(python, job)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    inference = outcome["inference"]
    # the worst informative guess (an attack no better than random guessing is no evidence)
    worst = max(inference, key=lambda s: (inference[s]["informative"], inference[s]["risk"]))
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "anonymeter": outcome["anonymeter"],
        "params": {
            **{k: job[k] for k in ("seed", "confidence_level", "n_attacks", "n_neighbors")},
            "singling_out_columns": job["singling_out_columns"],
            "link_columns": job["link_columns"],
        },
        "records": {
            "training": training.n_records,
            "control": control.n_records,
            "synthetic": synthetic.n_records,
        },
        "singling_out": outcome["singling_out"],
        "linkability": outcome["linkability"],
        "inference": inference,
        "inference_max": {"secret": worst, **inference[worst]},
    }


RISK_LABEL = "privacy-risk-attacks"
"""The release key's label of the attacks' seed (a replay attacks with the same choices)."""


def release_risks(
    run: ReleaseRun,
    training: PreparedTable,
    synthetic: PreparedTable,
    dp_edges: dict[str, list[float]] | None,
) -> dict[str, Any]:
    """A ``privacy_risk`` release's risks: its synthetic records attacked with its training
    part and the control rows its ingest held back (``private/<id>/control.parquet``, prepared
    as the training part was: the same parameters and DP bin edges ``dp_edges``).

    Returns :func:`table_risks`' result with ``params.held_back``: the share held back.

    Raises:
        SdsInputError: no anonymeter environment.
    """
    import pyarrow.parquet as pq

    from sds_core.data.preparation import prepare
    from sds_release.store.config.core_objects import prepare_params
    from sds_release.store.inputs.holdback import CONTROL_FILE, CONTROL_SHARE

    raw = pq.read_table(run.dirs.private_dir / CONTROL_FILE)
    control = prepare(raw, prepare_params(run.params, dp_edges, raw.column_names))
    seed = run.randomness().record_key(RISK_LABEL) % 2**32  # numpy's legacy seeds: 32 bits
    result = table_risks(training, control, synthetic, params=RiskParams(seed=seed))
    result["params"]["held_back"] = CONTROL_SHARE
    return result


def _run_job(python: Path, job: dict[str, Any]) -> dict[str, Any]:
    """Run :mod:`anonymeter_job` in anonymeter's environment; its stderr is never shown."""
    done = subprocess.run(  # -I: no PYTHON* variables, no user site, no script directory
        [str(python), "-I", str(_JOB)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        outcome: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        outcome = {}
    if done.returncode != 0 or not outcome:
        raise SdsInternalError(
            f"anonymeter's job failed in {python} (exit status {done.returncode}); its messages "
            "can quote the data and are not shown: check that `make anonymeter` completed"
        )
    if "error" in outcome:
        err = outcome["error"]
        raise SdsInternalError(
            f"anonymeter's {err['evaluator']} evaluation failed ({err['type']}); its message "
            "can quote the data and is not shown"
        )
    return outcome


def _risk_line(name: str, r: dict[str, Any]) -> str:
    lo, hi = r["ci"]
    flag = "" if r["informative"] else "  (attack no better than random guessing: no evidence)"
    return f"{name:<32} {r['risk']:>6.3f}  [{lo:.3f}, {hi:.3f}]{flag}"


def risk_summary_lines(result: dict[str, Any]) -> list[str]:
    """A short human-readable summary of :func:`privacy_risk`'s result."""
    p, rec = result["params"], result["records"]
    lines = [
        "Privacy risk of the synthetic records (anonymeter "
        f"{result['anonymeter']}): NOT differentially private, computed from the sensitive "
        "data; an empirical measure beside the release's DP guarantee, not a replacement.",
        f"training {rec['training']}, control {rec['control']}, synthetic {rec['synthetic']} "
        f"records; {p['n_attacks']} attacks each, {p['confidence_level']:.0%} intervals",
        f"{'attack':<32} {'risk':>6}  interval",
    ]
    for mode, r in result["singling_out"].items():
        lines.append(_risk_line(f"singling out ({mode})", r))
    lines.append(_risk_line("linkability", result["linkability"]))
    worst = result["inference_max"]
    lines.append(_risk_line(f"inference (max: {worst['secret']})", worst))
    return lines
