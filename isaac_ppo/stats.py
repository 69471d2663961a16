"""Statistics: the interquartile mean (IQM) and its stratified bootstrap confidence interval.

Agarwal et al. 2021, the rliable recipe, in plain numpy so the package needs neither scipy nor rliable.
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple

import numpy as np

# bounds the (reps, runs, points) resample array the bootstrap holds at once
BOOTSTRAP_CHUNK_ELEMENTS = 4_000_000


def iqm(values: Any, axis: int = 0) -> Any:
    """Interquartile mean along `axis`, as scipy.stats.trim_mean(values, 0.25, axis) computes it: int(n / 4)
    values cut from each end of the sorted values, the mean of the rest. A float for 1-D input."""
    x = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = x.shape[axis]
    if n == 0:
        raise ValueError("iqm of no values")
    cut = int(0.25 * n)
    kept = np.take(x, np.arange(cut, n - cut), axis=axis)
    result = kept.mean(axis=axis)
    return float(result) if np.ndim(result) == 0 else result


def stratified_resample_indices(strata: Sequence[Any], reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, n) run indices: each row draws, within every stratum, as many runs as it holds, with
    replacement, so each resample keeps the strata's sizes (no task is over- or under-represented)."""
    labels = np.asarray([str(s) for s in strata])
    columns = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        columns.append(members[rng.integers(0, len(members), size=(reps, len(members)))])
    return np.concatenate(columns, axis=1)


def stratified_bootstrap_ci(values: Any, strata: Sequence[Any], reps: int = 2000, seed: int = 0,
                            level: float = 0.95) -> Tuple[Any, Any]:
    """Percentile bootstrap CI of the IQM over runs (axis 0), resampling runs within each stratum.

    values: shape (runs,) or (runs, points); the CI is pointwise for the latter (vectorised over points).
    Returns (low, high): floats for (runs,), arrays of shape (points,) otherwise. Deterministic for a seed.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.shape[0] == 0:
        raise ValueError("bootstrap of no runs")
    if len(strata) != x.shape[0]:
        raise ValueError(f"{len(strata)} strata for {x.shape[0]} runs")
    if reps < 1:
        raise ValueError("reps must be at least 1")
    indices = stratified_resample_indices(strata, reps, np.random.default_rng(seed))
    per_rep = int(np.prod(x.shape))
    chunk = max(1, BOOTSTRAP_CHUNK_ELEMENTS // max(per_rep, 1))
    stats = np.concatenate([iqm(x[indices[i:i + chunk]], axis=1) for i in range(0, reps, chunk)], axis=0)
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(stats, [tail, 100.0 - tail], axis=0)
    if np.ndim(low) == 0:
        return float(low), float(high)
    return low, high
