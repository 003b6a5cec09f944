"""DP building blocks used by every mechanism: keyed randomness, exact noise, accounting.

``randomness`` (one secret key per release, labelled streams), ``noise`` (discrete Gaussian and
Laplace), ``percentile`` (the exponential-mechanism percentile), ``accounting`` (budget plan,
zCDP <-> (ε, δ)) and ``declared`` (declared domains and CatHist).
"""
