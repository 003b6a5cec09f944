"""The job run inside anonymeter's own environment (``make anonymeter``: ``.venv-anonymeter``).

anonymeter 1.1.0 pins numpy<1.27 and pyarrow<22, so it cannot be imported by the project; this
file is run there as a script (``python -I anonymeter_job.py``), imports nothing of the project,
reads one JSON job on stdin (the paths of three private Parquet files of string columns and the
attack settings), runs anonymeter's singling-out, linkability and inference evaluators and
writes one JSON result (rates and risks, no data) on stdout. anonymeter's warnings and logs are
kept off stderr; a failure is reported by exception type and evaluator, never its message
(which could quote values).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _rate(rate: Any) -> dict[str, float] | None:
    return None if rate is None else {"value": float(rate.value), "error": float(rate.error)}


def _outcome(evaluator: Any, confidence_level: float, caught: list[Any]) -> dict[str, Any]:
    """One evaluator's risk, its interval and the three success rates behind it."""
    results = evaluator.results(confidence_level=confidence_level)
    risk = results.risk()
    return {
        "risk": float(risk.value),
        "ci": [float(risk.ci[0]), float(risk.ci[1])],
        "attack_rate": _rate(results.attack_rate),
        "baseline_rate": _rate(results.baseline_rate),
        "control_rate": _rate(results.control_rate),
        "n_attacks": [
            int(results.n_attacks_ori),
            int(results.n_attacks_baseline),
            int(results.n_attacks_control),
        ],
        # anonymeter's sanity check: an attack no better than random guessing is no evidence
        "informative": bool(results.attack_rate.value > results.baseline_rate.value),
        "warnings": sorted({str(w.message).split(".")[0] for w in caught}),
    }


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Run the three evaluators on the job's files (see the module docstring)."""
    import logging
    import warnings

    import numpy as np
    import pandas as pd
    from anonymeter.evaluators import (
        InferenceEvaluator,
        LinkabilityEvaluator,
        SinglingOutEvaluator,
    )

    logging.getLogger("anonymeter").setLevel(logging.CRITICAL)
    # linkability and inference draw their targets with pandas' sample(), i.e. numpy's global
    # generator: seeding it, and the linkability baseline's generator, makes a run repeatable
    np.random.seed(job["seed"])
    _seed_linkability_baseline(job["seed"])
    ori, syn, control = (pd.read_parquet(job[k]) for k in ("training", "synthetic", "control"))
    level, n_attacks, n_jobs = job["confidence_level"], job["n_attacks"], job["n_jobs"]
    out: dict[str, Any] = {"anonymeter": _version()}

    def evaluated(name: str, make: Any, **evaluate: Any) -> dict[str, Any]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                evaluator = make().evaluate(**evaluate)
                return _outcome(evaluator, level, caught)
            except Exception as e:
                raise _Failed(name, type(e).__name__) from None

    out["singling_out"] = {
        mode: evaluated(
            f"singling-out ({mode})",
            lambda mode=mode: SinglingOutEvaluator(
                ori=ori,
                syn=syn,
                control=control,
                n_attacks=n_attacks,
                n_cols=job["singling_out_columns"],
                max_attempts=job["max_attempts"],
                seed=job["seed"],
            ),
            mode=mode,
        )
        for mode in ("univariate", "multivariate")
    }
    left, right = job["link_columns"]
    out["linkability"] = evaluated(
        "linkability",
        lambda: LinkabilityEvaluator(
            ori=ori,
            syn=syn,
            control=control,
            aux_cols=(left, right),
            n_attacks=n_attacks,
            n_neighbors=job["n_neighbors"],
        ),
        n_jobs=n_jobs,
    )
    out["inference"] = {
        secret: evaluated(
            f"inference ({secret})",
            lambda secret=secret: InferenceEvaluator(
                ori=ori,
                syn=syn,
                control=control,
                aux_cols=[c for c in ori.columns if c != secret],
                secret=secret,
                n_attacks=n_attacks,
            ),
            n_jobs=n_jobs,
        )
        for secret in job["secrets"]
    }
    return out


def _seed_linkability_baseline(seed: int) -> None:
    """Draw the linkability baseline's random links from a generator seeded by ``seed``.

    anonymeter 1.1.0 draws them in ``linkability_evaluator._random_links`` from an unseeded
    ``default_rng()``, so the baseline rate (and the ``informative`` flag read from it) would
    differ between two runs of one release; this is the same draw from a seeded generator.
    """
    import numpy as np
    from anonymeter.evaluators import linkability_evaluator as module

    if not hasattr(module, "_random_links"):  # another anonymeter than the pinned one
        raise _Failed("linkability (seeding its baseline)", "AttributeError")
    rng = np.random.default_rng(seed)

    def _random_links(n_synthetic: int, n_attacks: int, n_neighbors: int) -> Any:
        draws = [rng.choice(n_synthetic, size=n_neighbors, replace=False) for _ in range(n_attacks)]
        return np.array(draws)

    module._random_links = _random_links


class _Failed(Exception):
    def __init__(self, evaluator: str, kind: str) -> None:
        super().__init__(evaluator, kind)
        self.evaluator, self.kind = evaluator, kind


def _version() -> str:
    from importlib.metadata import version

    return version("anonymeter")


def main() -> int:
    """Read the job on stdin, write the result (or the failure) on stdout."""
    job = json.load(sys.stdin)
    try:
        result: dict[str, Any] = run(job)
    except _Failed as e:
        result = {"error": {"evaluator": e.evaluator, "type": e.kind}}
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
