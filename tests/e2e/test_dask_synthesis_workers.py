"""The synthesize stage's sequential work on a Dask worker process, never in the driver: the
consistent model's fit and sampling and the one-way reconciliation run on one worker of a
process cluster (the driver's own copies of those functions refuse to run here), and their
chunks are the local records byte for byte."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from sds_core.data.domain import Domain  # noqa: E402
from sds_core.data.table import PreparedTable  # noqa: E402
from sds_core.dp.randomness import ReleaseRandomness  # noqa: E402
from sds_core.marginals.aggregates import AggregateSet  # noqa: E402
from sds_core.marginals.engine import dp_aggregate  # noqa: E402
from sds_core.marginals.params import DpParams  # noqa: E402
from sds_core.synthesis.consistent import (  # noqa: E402
    AggregateNoise,
    ModelParams,
    synthesize_from_model,
)
from sds_core.synthesis.generator import synthesize  # noqa: E402
from sds_core.synthesis.params import SynthesisParams  # noqa: E402

CARDS = (2, 3, 5, 4, 6)
NOISE = AggregateNoise(sigma_by_len=(2.0, 3.0, 4.0), threshold_by_len=(0.0, 1.0, 1.0))


@pytest.fixture(scope="module")
def client(process_client: Any) -> Any:
    """The module's cluster: tests/conftest.py's ``process_client`` (2 worker processes)."""
    return process_client


@pytest.fixture(scope="module")
def aggregates() -> AggregateSet:
    """DP aggregates of a skewed 2,000-record table with empty cells (R = 3)."""
    rng = np.random.default_rng(4)
    codes = np.stack([np.minimum(rng.geometric(0.3, 2000) - 1, c - 1) for c in CARDS], axis=1)
    codes = codes.astype(np.int32)
    codes[rng.random(codes.shape) < 0.2] = -1
    dom = Domain(
        tuple(f"C{i}" for i in range(len(CARDS))),
        tuple(tuple(f"v{j}" for j in range(c)) for c in CARDS),
    )
    params = DpParams(epsilon=1.0, reporting_length=3)
    return dp_aggregate(
        PreparedTable(dom, codes), params, ReleaseRandomness.from_seed(1)
    ).aggregates


def _not_here(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"ran in the driver process {os.getpid()}")


@pytest.mark.parametrize("synthesis", ["model", "reconcile"])
def test_model_and_reconciliation_run_on_a_worker_process(
    client: Any, aggregates: AggregateSet, monkeypatch: pytest.MonkeyPatch, synthesis: str
) -> None:
    """The Dask executor's synthesis (what the synthesize stage runs on it) never fits,
    samples or reconciles in this process, and its chunks are the local records."""
    import sds_core.synthesis.consistent as consistent
    import sds_core.synthesis.generator as generator
    import sds_core.synthesis.reconcile as reconcile
    import sds_release.store.cluster.synthesis as cluster_synthesis
    from sds_release.store.cluster.executor import DaskExecutor

    key = b"k" * 32
    rng = ReleaseRandomness(key).generator("on-workers/synthesis")
    records = SynthesisParams(target_number_of_records=3000, reconcile_one_way=True)
    if synthesis == "model":
        local = synthesize_from_model(aggregates, NOISE, 3000, rng=rng, params=ModelParams())
    else:
        local = synthesize(aggregates, records, rng=rng, noise_sd_by_len=NOISE.sigma_by_len)
    for module, name in [
        (consistent, "fit_aggregates"),
        (consistent, "fit_problem"),
        (consistent, "fit_model"),
        (consistent, "sample_records"),
        (consistent, "synthesize_from_model"),
        (consistent, "synthesize_from_problem"),
        (cluster_synthesis, "synthesize_from_problem"),
        (reconcile, "reconcile_one_way"),
        (cluster_synthesis, "reconcile_one_way"),
        (generator, "synthesize"),
    ]:
        monkeypatch.setattr(module, name, _not_here)

    executor = DaskExecutor(client)
    rng = ReleaseRandomness(key).generator("on-workers/synthesis")
    if synthesis == "model":
        chunked = executor.sample_model(
            aggregates,
            NOISE,
            3000,
            rng=rng,
            params=ModelParams(max_model_bytes=1 << 30),
            multi_value_columns=(),
            part_records=1200,
        )
    else:
        chunked = executor.synthesize(
            aggregates,
            records,
            rng=rng,
            multi_value_columns=(),
            part_records=1200,
            progress=None,
            noise_sd_by_len=NOISE.sigma_by_len,
        )
    assert chunked.first_rows == (0, 1200, 2400) and chunked.n_records == 3000
    assert chunked.placement is executor.placement
    got = np.concatenate([c.codes for c in executor.chunks(chunked, 1200)])
    assert got.tobytes() == local.codes.tobytes()
    prefix = "sampled" if synthesis == "model" else "reconciled"
    ran = client.run_on_scheduler(lambda dask_scheduler: set(dask_scheduler.task_prefixes))
    assert prefix in ran
    workers = set(client.run(os.getpid).values())
    assert os.getpid() not in workers
