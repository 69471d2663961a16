"""Known answers for the learning-dynamics metrics in isaac_ppo.diagnostics.metrics."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from isaac_ppo.diagnostics.metrics import (
    coverage,
    dormant_fraction,
    effective_sample_size,
    feature_rank,
    grad_kurtosis,
    policy_variance,
    weight_norm,
)
from isaac_ppo.errors import UserError


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _rotation(d: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=_gen(seed), dtype=torch.float64))
    return q


# ------------------------------------------------------------------------------------------ feature rank


def test_feature_rank_of_rank_r_matrix():
    g = _gen(0)
    a = torch.randn(512, 5, generator=g)
    b = torch.randn(5, 64, generator=g)
    out = feature_rank(a @ b)
    assert set(out) == {"rank", "rank_fraction", "srank", "effective_rank"}
    assert out["rank"] == 5.0  # generic A, B: exactly rank 5, each direction holds > 1% of the energy
    assert out["srank"] <= 5.0
    assert out["rank_fraction"] == pytest.approx(5 / 64)
    assert 1.0 <= out["effective_rank"] <= 5.0 + 1e-6
    assert all(isinstance(v, float) for v in out.values())


def test_feature_rank_of_gaussian_features_is_near_full():
    out = feature_rank(torch.randn(1024, 32, generator=_gen(1)))
    assert out["rank"] >= 30
    assert out["rank_fraction"] >= 0.9
    assert out["srank"] >= 30
    assert out["effective_rank"] > 28


def test_effective_rank_of_equal_singular_values():
    q, _ = torch.linalg.qr(torch.randn(64, 16, generator=_gen(2), dtype=torch.float64))  # orthonormal columns
    out = feature_rank(3.0 * q)
    assert out["effective_rank"] == pytest.approx(16.0, abs=1e-9)
    assert out["rank"] == 16.0 and out["srank"] == 16.0 and out["rank_fraction"] == 1.0


def test_feature_rank_of_zeros_is_zero():
    out = feature_rank(torch.zeros(20, 8))
    assert out == {"rank": 0.0, "rank_fraction": 0.0, "srank": 0.0, "effective_rank": 0.0}


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_feature_rank_refuses_bad_delta(delta):
    with pytest.raises(UserError, match="diagnostics.delta=.* must be in \\(0, 1\\)"):
        feature_rank(torch.randn(10, 4), delta=delta)


def test_feature_rank_refuses_fewer_samples_than_units():
    with pytest.raises(UserError, match="N=8 < d=16.*diagnostics.samples"):
        feature_rank(torch.randn(8, 16))


# ----------------------------------------------------------------------------------------- dormant units


def _layer_with_dead_units(n: int, units: int, dead: int, seed: int) -> torch.Tensor:
    """|h| ~ 1 for live units (signs random), exact zeros for the first `dead` units."""
    g = _gen(seed)
    signs = torch.randint(0, 2, (n, units), generator=g).float() * 2 - 1
    h = signs * (1.0 + 0.1 * torch.rand(n, units, generator=g))
    h[:, :dead] = 0.0
    return h


@pytest.mark.parametrize("tau", [0.0, 0.1])
def test_dormant_planted_dead_units(tau):
    out = dormant_fraction([_layer_with_dead_units(64, 10, 3, seed=0)], tau=tau)
    assert out["layer0"] == pytest.approx(0.3)
    assert out["pooled"] == pytest.approx(0.3)


def test_dormant_tiny_unit_counts_only_above_zero_tau():
    h = _layer_with_dead_units(64, 10, 0, seed=1)
    h[:, 4] *= 1e-3  # score ~ 1e-3 / 0.9: dormant at tau 0.025, not dead at tau 0
    assert dormant_fraction([h], tau=0.025)["layer0"] == pytest.approx(0.1)
    assert dormant_fraction([h], tau=0.0)["layer0"] == 0.0


def test_dormant_pooled_over_layers_and_dict_names():
    a = _layer_with_dead_units(32, 10, 2, seed=2)
    b = _layer_with_dead_units(32, 30, 6, seed=3)
    out = dormant_fraction({"actor.0": a, "actor.1": b}, tau=0.0)
    assert out["actor.0"] == pytest.approx(0.2)
    assert out["actor.1"] == pytest.approx(0.2)
    assert out["pooled"] == pytest.approx((2 + 6) / 40)
    out_list = dormant_fraction([a, b], tau=0.0)
    assert set(out_list) == {"layer0", "layer1", "pooled", "low_std_pooled", "std_ratio_min"}
    assert out_list["pooled"] == pytest.approx(8 / 40)


def test_dormant_low_std_counts_constant_units():
    h = _layer_with_dead_units(64, 10, 0, seed=4)
    h[:, 0] = 0.7  # constant but far from dormant
    h[:, 1] = -0.3 + 1e-5 * torch.randn(64, generator=_gen(5))  # saturated: std ~ 1e-5
    out = dormant_fraction([h], tau=0.1)
    assert out["layer0"] == 0.0
    assert out["low_std_pooled"] == pytest.approx(0.2)


def test_low_std_is_relative_to_the_layer_so_it_reads_the_same_at_any_scale():
    h = _layer_with_dead_units(256, 10, 0, seed=6)  # unit stds ~ 0.6 around their layer's mean
    h[:, 2] = 0.5 + 0.01 * (h[:, 2] - h[:, 2].mean())  # std ~ 1% of the others': low at tau 0.025
    h[:, 3] = 0.5 + 0.2 * (h[:, 3] - h[:, 3].mean())  # 20%: low at tau 0.25 only
    for scale in (1e-4, 1.0, 1e3):  # an absolute threshold would call every unit low at 1e-4, none at 1e3
        assert dormant_fraction([h * scale], tau=0.025)["low_std_pooled"] == pytest.approx(0.1)
        assert dormant_fraction([h * scale], tau=0.25)["low_std_pooled"] == pytest.approx(0.2)
    # the same network seen by the classic score: both units are far from zero on average, neither is dormant
    assert dormant_fraction([h], tau=0.25)["layer0"] == 0.0
    # the smallest ratio, with no threshold: unit 2's std over the layer's mean unit std
    std = h.std(dim=0, unbiased=False).double()
    assert dormant_fraction([h], tau=0.025)["std_ratio_min"] == pytest.approx(float(std[2] / std.mean()), rel=1e-6)


@pytest.mark.parametrize("tau", [-0.01, 1.0, 2.0])
def test_dormant_refuses_bad_tau(tau):
    with pytest.raises(UserError, match="diagnostics.tau=.* must be in \\[0, 1\\)"):
        dormant_fraction([torch.ones(4, 3)], tau=tau)


# ------------------------------------------------------------------------------------------- weight norm


def test_weight_norm_known_values():
    lin = nn.Linear(4, 3)
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.bias.fill_(1.0)
    out = weight_norm(lin)
    assert out["global"] == pytest.approx(math.sqrt(15.0))
    assert out["weight"] == pytest.approx(math.sqrt(12.0))
    assert "bias" not in out


def test_weight_norm_per_layer_keys_are_weight_matrices_only():
    net = nn.Sequential(nn.Linear(2, 5), nn.ELU(), nn.Linear(5, 1))
    out = weight_norm(net)
    assert set(out) == {"global", "0.weight", "2.weight"}
    expected = math.sqrt(sum(float(p.detach().double().pow(2).sum()) for p in net.parameters()))
    assert out["global"] == pytest.approx(expected)
    assert out["0.weight"] == pytest.approx(float(net[0].weight.detach().double().norm()))


# ------------------------------------------------------------------------------------- gradient kurtosis


def test_grad_kurtosis_of_gaussian_without_log_is_three():
    g = torch.randn(200_000, generator=_gen(6), dtype=torch.float64)
    assert grad_kurtosis(g, log=False) == pytest.approx(3.0, abs=0.05)


def test_grad_kurtosis_of_log_abs_gaussian():
    # log|Z| = log(chi2_1) / 2 has cumulants psi'(1/2) = pi^2 / 2 and psi'''(1/2) = pi^4: Pearson kurtosis
    # 3 + pi^4 / (pi^2 / 2)^2 = 7. Cross-check against an independent numpy sample as well. The sample
    # kurtosis of 200k draws has a standard deviation of about 0.12 here (checked over 40 seeds), hence abs=0.5.
    parts = list(torch.randn(200_000, generator=_gen(7), dtype=torch.float64).split(50_000))  # list input
    kappa = grad_kurtosis(parts)
    z = np.log(np.abs(np.random.default_rng(8).standard_normal(400_000)) + 1e-8)
    c = z - z.mean()
    ref = float((c**4).mean() / (c**2).mean() ** 2)
    assert ref == pytest.approx(7.0, abs=0.5)
    assert kappa == pytest.approx(7.0, abs=0.5)
    assert kappa == pytest.approx(ref, abs=0.7)


def test_grad_kurtosis_constant_is_nan():
    assert math.isnan(grad_kurtosis(torch.full((100,), 0.1)))
    assert math.isnan(grad_kurtosis(torch.full((100,), 0.1), log=False))
    assert math.isnan(grad_kurtosis([]))


# --------------------------------------------------------------------------------- effective sample size


def test_ess_equal_log_ratios_is_one():
    assert effective_sample_size(torch.full((1000,), 0.37)) == pytest.approx(1.0, abs=1e-12)
    assert effective_sample_size(torch.zeros(7, 3)) == pytest.approx(1.0, abs=1e-12)


def test_ess_dominant_weights():
    n = 100
    one = torch.full((n,), -50.0)
    one[0] = 0.0
    assert effective_sample_size(one) == pytest.approx(1.0 / n, rel=1e-9)
    two = one.clone()
    two[1] = 0.0
    assert effective_sample_size(two) == pytest.approx(2.0 / n, rel=1e-9)


def test_ess_is_shift_invariant():
    l = 0.5 * torch.randn(256, generator=_gen(9), dtype=torch.float64)
    base = effective_sample_size(l)
    assert 0.0 < base < 1.0
    assert effective_sample_size(l + 123.0) == pytest.approx(base, rel=1e-10)
    assert effective_sample_size((l - 40.0).float()) == pytest.approx(base, rel=1e-5)


# -------------------------------------------------------------------------------------- policy variance


def test_policy_variance_constant_mu_is_zero():
    out = policy_variance(torch.full((16, 3), 0.4), torch.ones(3))
    assert out == {"policy_variance": 0.0, "mu_variance": 0.0}


def test_policy_variance_known_mu_variance():
    mu = torch.tensor([[0.0], [2.0]])
    # per-state sigma with the same spread: both parameters have population variance 1
    out = policy_variance(mu, torch.tensor([[1.0], [3.0]]))
    assert out["mu_variance"] == pytest.approx(1.0)
    assert out["policy_variance"] == pytest.approx(1.0)


def test_policy_variance_state_independent_sigma_halves_the_mean():
    # mu: action 0 in {0, 2} (variance 1), action 1 in {1, 1} (variance 0) -> mu_variance = 0.5.
    # sigma (state-independent, shape (A,)) adds two zero-variance parameters: policy_variance = (1 + 0 + 0 + 0) / 4.
    mu = torch.tensor([[0.0, 1.0], [2.0, 1.0]])
    out = policy_variance(mu, torch.tensor([0.5, 0.8]))
    assert out["mu_variance"] == pytest.approx(0.5)
    assert out["policy_variance"] == pytest.approx(0.25)


# ---------------------------------------------------------------------------------------------- coverage


def test_coverage_identical_points_is_one_cell():
    pts = torch.full((50, 6), 0.3)
    assert coverage(pts, grid=20) == pytest.approx(1 / 400)
    assert coverage(torch.zeros(1, 3), grid=7) == pytest.approx(1 / 49)


def test_coverage_rotated_lattice_fills_the_grid():
    # A 60 x 30 lattice on [0, 2] x [0, 1] (anisotropic, so the principal axes are the lattice axes; a square
    # lattice has equal variances and an arbitrary in-plane PCA basis), embedded in 5-D and rotated.
    xs, ys = torch.meshgrid(
        torch.linspace(0, 2, 60, dtype=torch.float64), torch.linspace(0, 1, 30, dtype=torch.float64), indexing="ij"
    )
    plane = torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=1)
    pts = torch.cat([plane, torch.zeros(plane.shape[0], 3, dtype=torch.float64)], dim=1) @ _rotation(5, 10).T
    pts = pts + 1.5  # an offset does not matter
    assert coverage(pts, grid=10) == 1.0
    assert coverage(pts.float(), grid=10) == 1.0


def test_coverage_points_on_a_line():
    t = torch.linspace(-1, 1, 200, dtype=torch.float64).unsqueeze(1)
    direction = torch.tensor([[0.3, -1.2, 0.7, 2.0]], dtype=torch.float64)
    pts = t * direction + torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    grid = 20
    cov = coverage(pts, grid=grid)
    assert cov <= 2 * grid / grid**2
    assert cov == pytest.approx(grid / grid**2)  # one row of cells
    assert coverage(torch.linspace(0, 1, 100).unsqueeze(1), grid=grid) == pytest.approx(grid / grid**2)  # d = 1


def test_coverage_gaussian_cloud_is_partial():
    cov = coverage(torch.randn(500, 8, generator=_gen(11)), grid=20)
    assert 0.05 < cov < 1.0


@pytest.mark.parametrize("grid", [0, -3, 2.5])
def test_coverage_refuses_bad_grid(grid):
    with pytest.raises(UserError, match="diagnostics.grid="):
        coverage(torch.randn(10, 3), grid=grid)


def test_coverage_refuses_empty_points_and_unknown_method():
    with pytest.raises(UserError):
        coverage(torch.zeros(0, 3))
    with pytest.raises(UserError, match="method"):
        coverage(torch.randn(10, 3), method="tsne")


def test_coverage_umap_missing_is_a_user_error():
    try:
        import umap  # noqa: F401
    except ImportError:
        with pytest.raises(UserError, match="pip install umap-learn"):
            coverage(torch.randn(10, 3), method="umap")
    else:
        pytest.skip("umap-learn is installed")
