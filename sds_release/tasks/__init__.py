"""Prefect tasks: one thin task per release stage (the stage names are in
sds_release.store.run.stages).

Each task wraps one ``sds_core`` stage (or one store operation) and adds only I/O, logging and
progress; the charge/draw/checkpoint rule is ``ReleaseRun.stage``. Tasks that read the sensitive
table never persist or cache their results (:data:`sds_release.tasks.options.SENSITIVE`).
"""
