"""Aggregate-seeded synthesis (spec §2.1): synthetic records from the DP aggregates alone.

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
