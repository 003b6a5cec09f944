"""Prefect flows and the `sds` command line."""
