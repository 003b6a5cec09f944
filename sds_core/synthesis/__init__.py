"""Aggregate-seeded synthesis (spec §2.1): synthetic records from the DP aggregates alone.

How it differs from :mod:`sds_core.synthesizers`: this package is the SDS method's own
post-processing step, which the release pipeline runs as its ``synthesize`` stage (it spends no
budget and knows no other method); ``synthesizers`` is the registry of whole DP synthesizers
(fit, which spends, then sample) chosen by name, where SDS is one entry that calls this package.

``generator`` is the entry point (``synthesize``; its settings, ``SynthesisParams``, are in
``params``); ``layout`` lays the aggregates out as flat arrays (the ``Layout`` bundle); the
compiled kernels are
``_completion_kernel`` (the default, column-by-column completion), ``_reference_kernel``
(pac-synth's mode), with their settings and work state (``_state``), shared record operations
(``_records``), aggregate lookups (``_lookups``) and bitsets (``_bitsets``).
``reconcile`` is the optional last step (``SynthesisParams.reconcile_one_way``: surplus cells
re-drawn towards the DP 1-counts, pair-checked). ``consistent`` is the other mode: one model
fitted to the aggregates (``sds_core.model``), sampled. ``sizes`` holds both modes' size limits
as functions of the columns' sizes alone (checked before a release's first charge).
"""
