"""The 95% interval of every published noise figure.

One constant, with no imports, so that the light modules that write or show an interval
(``aggregates.parquet``'s half-width column, the explorer's and the series' error bars) and the
heavy ones (``evaluation.json``'s within-noise share, ``sds plan``'s forecast) use the same one.
"""

from __future__ import annotations

__all__ = ["Z_95"]

Z_95 = 1.959963984540054
"""The standard normal's 97.5% quantile: a count whose noise is (close to) Gaussian with standard
deviation ``sd`` lies within ``±Z_95 · sd`` of its true value 95% of the time. A published
half-width is ``sds_release.store.workspace.encoding.half_width_95``."""
