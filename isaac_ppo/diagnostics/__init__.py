"""Learning-dynamics diagnostics (feature rank, dormant units, weight norm, gradient kurtosis, ESS, coverage)."""
