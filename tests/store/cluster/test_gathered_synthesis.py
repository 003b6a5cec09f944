"""One synthesis path on the cluster (sds_release/store/cluster/synthesis.py): the chunks of
``synthesize_on_cluster``, reconciled on one worker when asked (``synthesize_reconciled``), and
the consistent model sampled on one worker (``sample_model_on_cluster``) are the local records
byte for byte, in the chunks ``chunk_bounds`` gives, and leave the generator where it does."""

from __future__ import annotations

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
from sds_release.store.cluster.synthesis import (  # noqa: E402
    sample_model_on_cluster,
    synthesize_on_cluster,
    synthesize_reconciled,
)
from sds_release.store.workspace.encoding import chunk_bounds  # noqa: E402

CARDS = (2, 3, 5, 8, 4, 6, 12)


@pytest.fixture(scope="module")
def aggregates() -> AggregateSet:
    """DP aggregates of a skewed 3,000-record table with empty cells (R = 3, small ε: the
    thresholds drop combinations, so the records fall short of the DP 1-counts)."""
    rng = np.random.default_rng(4)
    codes = np.stack([np.minimum(rng.geometric(0.3, 3000) - 1, c - 1) for c in CARDS], axis=1)
    codes = codes.astype(np.int32)
    codes[rng.random(codes.shape) < 0.3] = -1
    dom = Domain(
        tuple(f"C{i}" for i in range(len(CARDS))),
        tuple(tuple(f"v{j:02d}" for j in range(c)) for c in CARDS),
    )
    table = PreparedTable(dom, codes)
    params = DpParams(epsilon=0.5, reporting_length=3)
    return dp_aggregate(table, params, ReleaseRandomness.from_seed(1)).aggregates


@pytest.mark.parametrize("batches", [1, 3])
@pytest.mark.parametrize("reconcile", [False, True], ids=["plain", "reconciled"])
def test_chunks_on_the_workers_are_the_local_records(
    client: Any, aggregates: AggregateSet, batches: int, reconcile: bool
) -> None:
    """Batches on the workers (reconciled on one worker): the local table, in the chunks."""
    params = SynthesisParams(
        target_number_of_records=5000, parallel_batches=batches, reconcile_one_way=reconcile
    )
    local = synthesize(aggregates, params, rng=np.random.default_rng(8))
    make = synthesize_reconciled if reconcile else synthesize_on_cluster
    chunked = make(
        client,
        aggregates,
        params,
        rng=np.random.default_rng(8),
        multi_value_columns=(),
        part_records=1500,
    )
    assert chunked.first_rows == tuple(lo for lo, _ in chunk_bounds(5000, 1500))
    got = _whole(chunked)
    assert got.n_records == local.n_records == 5000
    assert got.domain == local.domain
    assert got.codes.dtype == local.codes.dtype
    assert got.codes.tobytes() == local.codes.tobytes()
    if reconcile:  # the reconciliation did change records (the comparison covers it)
        plain = synthesize(
            aggregates,
            SynthesisParams(target_number_of_records=5000, parallel_batches=batches),
            rng=np.random.default_rng(8),
        )
        assert not np.array_equal(plain.codes, local.codes)


@pytest.mark.parametrize("batches", [1, 3])
def test_cluster_synthesis_leaves_the_generator_where_the_local_run_does(
    client: Any, aggregates: AggregateSet, batches: int
) -> None:
    """After the chunks are made the generator's state is the local run's after its shuffle
    (what the reconciliation then draws from)."""
    params = SynthesisParams(target_number_of_records=3000, parallel_batches=batches)
    local_rng, cluster_rng = np.random.default_rng(3), np.random.default_rng(3)
    synthesize(aggregates, params, rng=local_rng)
    chunked = synthesize_on_cluster(
        client,
        aggregates,
        params,
        rng=cluster_rng,
        multi_value_columns=(),
        part_records=1000,
    )
    assert len(chunked.parts) == 3 and chunked.n_records == 3000
    assert cluster_rng.bit_generator.state == local_rng.bit_generator.state


def _whole(chunked: Any) -> PreparedTable:
    """The chunks brought here and written into one table."""
    parts = list(chunked.chunks())
    return PreparedTable(parts[0].domain, np.concatenate([p.codes for p in parts]))


def test_model_sampled_on_a_worker_is_the_local_model(
    client: Any, aggregates: AggregateSet
) -> None:
    """The consistent model fitted and sampled on one worker, cut into chunks there: the
    local records byte for byte, and the driver's generator is left untouched."""
    noise = AggregateNoise(sigma_by_len=(2.0, 3.0, 4.0), threshold_by_len=(0.0, 1.0, 1.0))
    params = ModelParams(iterations=30)
    local = synthesize_from_model(
        aggregates, noise, 4000, rng=np.random.default_rng(5), params=params
    )
    rng = np.random.default_rng(5)
    state = rng.bit_generator.state
    chunked = sample_model_on_cluster(
        client,
        aggregates,
        noise,
        4000,
        rng=rng,
        params=params,
        multi_value_columns=(),
        part_records=1500,
    )
    assert rng.bit_generator.state == state
    assert chunked.n_records == 4000 and len(chunked.parts) == 3
    assert _whole(chunked).codes.tobytes() == local.codes.tobytes()


class _SubmitSpy:
    """The cluster's client, recording every argument of every ``submit`` (the rest passed
    through): what the scheduler keeps as the tasks' arguments."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.arguments: list[Any] = []

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        self.arguments.extend(args)
        self.arguments.extend(kwargs.values())
        return self._client.submit(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_model_task_is_sent_its_problem_not_the_aggregates(
    client: Any, aggregates: AggregateSet
) -> None:
    """``sample_model_on_cluster`` sends no task the aggregates (the embedded scheduler, in the
    driver, would keep them to the end of the release): the model's task gets its problem,
    the domain and the published values, and refuses the aggregates."""
    from sds_core.errors import SdsInternalError
    from sds_core.synthesis.consistent import ModelProblem, published_values
    from sds_release.store.cluster.synthesis import _sampled

    noise = AggregateNoise(sigma_by_len=(2.0, 3.0, 4.0), threshold_by_len=(0.0, 1.0, 1.0))
    params = ModelParams(iterations=10)
    spy = _SubmitSpy(client)
    chunked = sample_model_on_cluster(
        spy,
        aggregates,
        noise,
        2000,
        rng=np.random.default_rng(5),
        params=params,
        multi_value_columns=(),
        part_records=None,
    )
    assert chunked.n_records == 2000
    assert not any(isinstance(a, AggregateSet) for a in spy.arguments)
    assert any(isinstance(a, ModelProblem) for a in spy.arguments)
    keep = published_values(aggregates)
    rng = np.random.default_rng(5)
    with pytest.raises(SdsInternalError, match="sent its problem"):
        _sampled(aggregates, noise, aggregates.domain, keep, 10, rng, params, ())  # type: ignore[arg-type]
