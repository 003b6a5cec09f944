"""A consistent probabilistic model fitted to noisy marginals (Private-PGM's estimation, numpy).

``structure``: the junction tree (cliques, parents, sizes) and the memory estimate made before
any fitting; ``inference``: exact belief propagation on it (log space); ``measurements``: noisy
and censored marginal measurements and their negative log-likelihood; ``estimation``: mirror
descent over the marginal polytope; ``sampling``: records drawn from the fitted model with
controlled rounding. Pure post-processing: nothing here reads sensitive data or spends budget.
"""
