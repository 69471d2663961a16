"""Learning-dynamics metrics as pure functions: tensors in, Python floats (or small dicts of floats) out.

Definitions follow Mayor et al. 2025 (arXiv 2506.03404), Appendix B, and the works it cites.
No state, no hooks; inputs may be float32 or float64 on any device and are copied to CPU float64 inside.
"""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from isaac_ppo.errors import UserError

TensorOrList = Union[torch.Tensor, Sequence[torch.Tensor]]

# Spreads of a projected axis below this fraction of the data's magnitude are float64 rounding noise
# (points on a line, identical points), not an extent to stretch over [0, 1].
_COVERAGE_RTOL = 1e-10


def _cpu64(x: torch.Tensor) -> torch.Tensor:
    return x.detach().to(device="cpu", dtype=torch.float64)


def _check_delta(delta: float) -> None:
    if not (0.0 < float(delta) < 1.0):
        raise UserError(f"diagnostics.delta={delta} must be in (0, 1)")


def _energy_rank(values: torch.Tensor, delta: float) -> int:
    """Smallest k with sum_{i<=k} values_i >= (1 - delta) * sum_i values_i (values sorted descending)."""
    cum = torch.cumsum(values, dim=0)
    total = cum[-1]
    if not bool(total > 0):
        return 0
    hits = torch.nonzero(cum >= (1.0 - delta) * total)
    return int(hits[0, 0].item()) + 1


# --------------------------------------------------------------------------------------------- feature rank


def feature_rank(features: torch.Tensor, delta: float = 0.01) -> Dict[str, float]:
    """Approximate rank of an (N x d) feature matrix, no mean-centring: smallest k holding (1 - delta) of sum s_i^2.

    Yang et al. 2019 as used by Moalla et al. 2024; also srank (same rule on s_i, Kumar et al. 2021) and the
    effective rank exp(H(p)), p_i = s_i / sum s (Roy & Vetterli 2007). Keys: rank, rank_fraction, srank,
    effective_rank. All-zero features give 0 for every key. Leading dims beyond the last are flattened into N.
    """
    _check_delta(delta)
    if features.dim() < 2:
        raise UserError(f"feature rank needs an (N x d) matrix of features, got shape {tuple(features.shape)}")
    phi = _cpu64(features).reshape(-1, features.shape[-1])
    n, d = phi.shape
    if d == 0:
        raise UserError("feature rank needs at least one unit: d=0")
    if n < d:
        raise UserError(
            f"feature rank needs at least as many samples as units: N={n} < d={d}; raise diagnostics.samples"
        )
    s = torch.linalg.svdvals(phi)  # descending
    rank = _energy_rank(s * s, delta)
    srank = _energy_rank(s, delta)
    total = float(s.sum())
    if total > 0:
        p = s / total
        p = p[p > 0]
        effective_rank = math.exp(float(-(p * torch.log(p)).sum()))
    else:
        effective_rank = 0.0
    return {
        "rank": float(rank),
        "rank_fraction": rank / d,
        "srank": float(srank),
        "effective_rank": effective_rank,
    }


# ------------------------------------------------------------------------------------------- dormant units


def dormant_fraction(
    activations: Union[Sequence[torch.Tensor], Mapping[str, torch.Tensor]], tau: float
) -> Dict[str, float]:
    """Fraction of tau-dormant units per layer and pooled: s_i = mean|h_i| / (mean_j mean|h_j| + 1e-9) <= tau.

    Sokar et al. 2023 (ReDo). It is made for ReLU, whose dead units output 0; an ELU unit is almost never near 0
    on average (it saturates at -1), so it reads 0 in every ELU run measured. "low_std_pooled" gives those
    networks a dormancy they can show: the fraction of units whose population std over the batch is at most tau
    times their layer's mean unit std, std_i / (mean_j std_j + 1e-9) <= tau: a unit that answers every input
    alike carries nothing, whatever its level (Moalla et al. 2024 count such collapsed units with an absolute
    threshold; relative to the layer it reads the same at any scale). Each layer is an (N x units)
    post-activation tensor; keys are "layer0", "layer1", ... for a list, the names for a dict, plus "pooled"
    (dormant / all units), "low_std_pooled" and "std_ratio_min", the smallest std_i / mean_j std_j over every
    hidden unit: it moves long before any unit crosses a threshold (in the Ant runs measured, from ~0.5 at
    initialisation to ~0.14 at iteration 50, while every fraction read 0; benchmarks/history/diagnostics.md).
    """
    if not (0.0 <= float(tau) < 1.0):
        raise UserError(f"diagnostics.tau={tau} must be in [0, 1)")
    if isinstance(activations, Mapping):
        named: List[Tuple[str, torch.Tensor]] = [(str(k), v) for k, v in activations.items()]
    else:
        named = [(f"layer{i}", v) for i, v in enumerate(activations)]
    if not named:
        raise UserError("dormant_fraction needs at least one layer of activations")
    out: Dict[str, float] = {}
    dormant_total = 0
    low_std_total = 0
    units_total = 0
    ratio_min = math.inf
    for name, h in named:
        if name in ("pooled", "low_std_pooled", "std_ratio_min"):
            raise UserError(f"dormant_fraction: layer name {name!r} is reserved; rename the layer")
        if h.dim() < 2 or h.shape[-1] == 0:
            raise UserError(f"dormant_fraction: layer {name!r} must be (N x units), got shape {tuple(h.shape)}")
        a = _cpu64(h).reshape(-1, h.shape[-1])
        if a.shape[0] == 0:
            raise UserError(f"dormant_fraction: layer {name!r} has no samples")
        mean_abs = a.abs().mean(dim=0)
        score = mean_abs / (mean_abs.mean() + 1e-9)
        dormant = int((score <= tau).sum())
        std = a.std(dim=0, unbiased=False)
        ratio = std / (std.mean() + 1e-9)
        low_std = int((ratio <= tau).sum())
        ratio_min = min(ratio_min, float(ratio.min()))
        units = a.shape[1]
        out[name] = dormant / units
        dormant_total += dormant
        low_std_total += low_std
        units_total += units
    out["pooled"] = dormant_total / units_total
    out["low_std_pooled"] = low_std_total / units_total
    out["std_ratio_min"] = ratio_min
    return out


# --------------------------------------------------------------------------------------------- weight norm


def weight_norm(module: nn.Module) -> Dict[str, float]:
    """L2 norms: "global" = sqrt(sum of every parameter squared, biases included), and one per weight matrix.

    Moalla et al. 2024 / Lyle et al. 2023. Per-layer keys are parameter names (e.g. "0.weight") of the
    parameters with dim >= 2; call it once per network (actor, critic) for per-network numbers.
    """
    total = 0.0
    out: Dict[str, float] = {}
    for name, p in module.named_parameters():
        sq = float(_cpu64(p).pow(2).sum())
        total += sq
        if p.dim() >= 2:
            out[name] = math.sqrt(sq)
    return {"global": math.sqrt(total), **out}


# ------------------------------------------------------------------------------------------ gradient kurtosis


def _flatten_all(xs: TensorOrList) -> torch.Tensor:
    if isinstance(xs, torch.Tensor):
        return _cpu64(xs).reshape(-1)
    parts = [_cpu64(x).reshape(-1) for x in xs if x is not None]
    if not parts:
        return torch.zeros(0, dtype=torch.float64)
    return torch.cat(parts)


def grad_kurtosis(grads: TensorOrList, eps: float = 1e-8, log: bool = True) -> float:
    """Pearson kurtosis kappa = m4 / m2^2 of L = log(|g| + eps) (or of g itself when log=False); Garg et al. 2021.

    Returns kappa, not kappa - 3 (a normal sample gives 3). All entries (a tensor or a list of tensors; None
    entries skipped) are pooled; returns float('nan') when there are no entries or all values are equal.
    """
    g = _flatten_all(grads)
    if g.numel() == 0:
        return float("nan")
    x = torch.log(g.abs() + eps) if log else g
    if bool(x.max() == x.min()):
        return float("nan")
    c = x - x.mean()
    c2 = c * c
    m2 = c2.mean()
    if not bool(m2 > 0):
        return float("nan")
    return float((c2 * c2).mean() / (m2 * m2))


# ----------------------------------------------------------------------------------- effective sample size


def effective_sample_size(log_ratio: torch.Tensor) -> float:
    """Normalised ESS = (sum w)^2 / sum w^2 / N, w = exp(log_ratio), in log space; Martino et al. 2017.

    In (0, 1]; equal log-ratios give 1. Pass the log-ratios of whatever set (minibatch or whole batch) is meant.
    """
    l = _cpu64(log_ratio).reshape(-1)
    n = l.numel()
    if n == 0:
        raise UserError("effective_sample_size needs at least one log-ratio")
    log_ess = 2.0 * torch.logsumexp(l, dim=0) - torch.logsumexp(2.0 * l, dim=0)
    ess = math.exp(float(log_ess)) / n
    return min(ess, 1.0)  # ESS <= N exactly; only rounding can push it above


# -------------------------------------------------------------------------------------------- policy variance


def policy_variance(mu: torch.Tensor, sigma: torch.Tensor) -> Dict[str, float]:
    """Variance over states of the Gaussian parameters [mu, sigma], mean over parameters and action dims.

    Moalla et al. 2024 (continuous form); population variance. mu is (N x A); sigma is (N x A) or a
    state-independent (A,) tensor broadcast to the states (its variance is 0, so it halves the mean).
    Keys: "policy_variance" (over [mu, sigma]) and "mu_variance" (over mu alone).
    """
    m = _cpu64(mu)
    if m.dim() == 1:
        m = m.unsqueeze(-1)
    m = m.reshape(-1, m.shape[-1])
    if m.shape[0] == 0 or m.shape[1] == 0:
        raise UserError(f"policy_variance needs at least one state and one action, got mu {tuple(mu.shape)}")
    s = _cpu64(sigma)
    try:
        s = torch.broadcast_to(s, mu.shape).reshape(m.shape)
    except RuntimeError as exc:
        raise UserError(
            f"policy_variance: sigma of shape {tuple(sigma.shape)} does not match mu of shape {tuple(mu.shape)}"
        ) from exc
    mu_var = m.var(dim=0, unbiased=False)
    sigma_var = s.var(dim=0, unbiased=False)
    return {
        "policy_variance": float(torch.cat([mu_var, sigma_var]).mean()),
        "mu_variance": float(mu_var.mean()),
    }


# -------------------------------------------------------------------------------------------------- coverage


def _pca_2d(x: torch.Tensor) -> torch.Tensor:
    """(N x 2) projection onto the top-2 principal axes (zero columns where fewer exist), sign-fixed."""
    n = x.shape[0]
    centred = x - x.mean(dim=0, keepdim=True)
    _, _, vh = torch.linalg.svd(centred, full_matrices=False)
    proj = centred @ vh[:2].T
    if proj.shape[1] < 2:
        proj = torch.cat([proj, torch.zeros(n, 2 - proj.shape[1], dtype=proj.dtype)], dim=1)
    # fix each axis' sign (largest |coordinate| positive) so the result does not depend on the SVD's sign choice
    idx = proj.abs().argmax(dim=0)
    signs = torch.sign(proj[idx, torch.arange(2)])
    signs[signs == 0] = 1.0
    return proj * signs


def coverage(
    points: torch.Tensor, grid: int = 20, generator: Optional[torch.Generator] = None, method: str = "pca"
) -> float:
    """Occupied cells / grid^2 of the 2-D projection of (N x d) points, min-max normalised; Mayor et al. 2025 B.7.

    Default method="pca" (centre, top-2 right singular vectors; deterministic, generator unused); method="umap"
    (the paper's choice, needs umap-learn; seeded from generator). A constant axis (spread below 1e-10 of the
    data's magnitude, i.e. rounding noise) maps to 0, so identical points give 1 / grid^2.
    """
    if isinstance(grid, bool) or int(grid) != grid or grid < 1:
        raise UserError(f"diagnostics.grid={grid} must be an integer >= 1")
    grid = int(grid)
    if method not in ("pca", "umap"):
        raise UserError(f"coverage method={method} must be 'pca' or 'umap'")
    x = _cpu64(points)
    if x.dim() == 1:
        x = x.unsqueeze(-1)
    if x.dim() != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise UserError(f"coverage needs (N x d) points with N >= 1 and d >= 1, got shape {tuple(points.shape)}")
    n, d = x.shape
    if d < 2:
        x = torch.cat([x, torch.zeros(n, 2 - d, dtype=x.dtype)], dim=1)
    if method == "umap":
        try:
            import umap  # type: ignore
        except ImportError as exc:
            raise UserError("coverage with method=umap needs the umap-learn package: pip install umap-learn") from exc
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())
        proj = torch.as_tensor(
            umap.UMAP(n_components=2, random_state=seed).fit_transform(x.numpy()), dtype=torch.float64
        )
        scale = float(proj.abs().max())
    else:
        proj = _pca_2d(x)
        scale = float(x.abs().max())
    lo = proj.min(dim=0).values
    span = proj.max(dim=0).values - lo
    constant = span <= _COVERAGE_RTOL * scale
    unit = (proj - lo) / torch.where(constant, torch.ones_like(span), span)
    unit[:, constant] = 0.0
    cells = torch.clamp(torch.floor(unit * grid).long(), 0, grid - 1)
    occupied = torch.unique(cells[:, 0] * grid + cells[:, 1]).numel()
    return occupied / (grid * grid)
