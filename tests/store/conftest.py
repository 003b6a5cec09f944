"""Fixtures the store tests share with the pipeline tests (a tiny dataset, the Prefect server)."""

from tests.pipeline.conftest import prefect_server, tiny_config, tiny_csv  # noqa: F401
