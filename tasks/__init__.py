"""Prefect tasks and release infrastructure.

Tasks are thin wrappers (I/O, logging, retries) around one sds_core stage each; the ledger
and the release workspace (files, manifest, audit) live here too.
"""
