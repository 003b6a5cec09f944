"""Prefect tasks: thin wrappers (I/O, logging, retries) around one sds_core stage each; plus the ledger and release workspace."""
