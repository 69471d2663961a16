"""Gaussian policy math, the bounds loss, the running normaliser and the actor-critic network."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.distributions import Normal, kl_divergence

from isaac_ppo.agent.model import ActorCritic, gaussian_entropy, gaussian_kl, gaussian_log_prob
from isaac_ppo.agent.normalize import RunningMeanStd
from isaac_ppo.agent.ppo import bounds_loss

SHAPES = [(1, 1), (7, 3), (4, 5, 2), (2, 3, 4, 6)]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------------------ Gaussian math


@pytest.mark.parametrize("shape", SHAPES)
def test_log_prob_matches_torch_normal(shape):
    g = _gen(1)
    mu = torch.randn(shape, generator=g, dtype=torch.float64)
    log_std = 0.5 * torch.randn(shape[-1], generator=g, dtype=torch.float64)
    actions = mu + 2.0 * torch.randn(shape, generator=g, dtype=torch.float64)
    expected = Normal(mu, log_std.exp().expand_as(mu)).log_prob(actions).sum(-1)
    got = gaussian_log_prob(actions, mu, log_std.expand_as(mu))
    assert got.shape == shape[:-1]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_log_prob_float32_matches_torch_normal(shape):
    g = _gen(2)
    mu = torch.randn(shape, generator=g)
    log_std = 0.3 * torch.randn(shape, generator=g)
    actions = mu + torch.randn(shape, generator=g)
    expected = Normal(mu, log_std.exp()).log_prob(actions).sum(-1)
    torch.testing.assert_close(gaussian_log_prob(actions, mu, log_std), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_entropy_matches_torch_normal(shape):
    log_std = 0.7 * torch.randn(shape, generator=_gen(3), dtype=torch.float64)
    expected = Normal(torch.zeros(shape, dtype=torch.float64), log_std.exp()).entropy().sum(-1)
    got = gaussian_entropy(log_std)
    assert got.shape == shape[:-1]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_kl_matches_torch_normal(shape):
    g = _gen(4)
    mu_old, mu_new = torch.randn(shape, generator=g, dtype=torch.float64), torch.randn(shape, generator=g, dtype=torch.float64)
    ls_old = 0.4 * torch.randn(shape, generator=g, dtype=torch.float64)
    ls_new = 0.4 * torch.randn(shape, generator=g, dtype=torch.float64)
    expected = kl_divergence(Normal(mu_old, ls_old.exp()), Normal(mu_new, ls_new.exp())).sum(-1)
    got = gaussian_kl(mu_old, ls_old, mu_new, ls_new)
    assert got.shape == shape[:-1]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # KL(p || p) = 0 and the direction matters (old || new, not new || old)
    torch.testing.assert_close(gaussian_kl(mu_old, ls_old, mu_old, ls_old), torch.zeros(shape[:-1], dtype=torch.float64))
    reverse = kl_divergence(Normal(mu_new, ls_new.exp()), Normal(mu_old, ls_old.exp())).sum(-1)
    assert not torch.allclose(got, reverse)


# ------------------------------------------------------------------------------------------ bounds loss


def test_bounds_loss_zero_inside_soft_bound():
    mu = torch.tensor([[0.0, 1.1, -1.1], [1.0999, -1.0999, 0.5]])
    assert float(bounds_loss(mu)) == 0.0


def test_bounds_loss_hand_example():
    mu = torch.tensor([[1.5, -0.5], [-2.0, 1.1], [2.1, -1.6]], dtype=torch.float64)
    # row 0: (1.5-1.1)^2 = 0.16; row 1: (-2.0+1.1)^2 = 0.81; row 2: (2.1-1.1)^2 + (-1.6+1.1)^2 = 1 + 0.25
    expected = (0.16 + 0.81 + 1.25) / 3
    assert float(bounds_loss(mu)) == pytest.approx(expected, rel=1e-12)
    assert float(bounds_loss(mu, soft_bound=3.0)) == 0.0


# ------------------------------------------------------------------------------------------ RunningMeanStd


def test_running_mean_std_matches_numpy_over_batches():
    rng = np.random.default_rng(5)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)) * np.array([1.0, 10.0, 0.1, 1.0]) for n in (3, 50, 17)]
    rms = RunningMeanStd((4,))
    for b in batches:
        rms.update(torch.tensor(b, dtype=torch.float32))
    allx = np.concatenate([b.astype(np.float32).astype(np.float64) for b in batches])
    np.testing.assert_allclose(rms.mean.numpy(), allx.mean(0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(rms.var.numpy(), allx.var(0, ddof=0), rtol=1e-4)
    assert float(rms.count) == pytest.approx(70 + 1e-5, rel=1e-12)
    # exactly: the initial pseudo-sample (mean 0, var 1, weight epsilon) folded in with the data
    eps = 1e-5
    n = len(allx)
    exp_mean = allx.sum(0) / (n + eps)
    exp_m2 = ((allx - exp_mean) ** 2).sum(0) + eps * (1.0 + exp_mean ** 2)
    np.testing.assert_allclose(rms.mean.numpy(), exp_mean, rtol=1e-10)
    np.testing.assert_allclose(rms.var.numpy(), exp_m2 / (n + eps), rtol=1e-9)


def test_running_mean_std_update_order_independent():
    rng = np.random.default_rng(6)
    x = torch.tensor(rng.normal(size=(40, 2)))
    a, b = RunningMeanStd((2,)), RunningMeanStd((2,))
    a.update(x)
    for chunk in x.split(7):
        b.update(chunk)
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(a.var, b.var, rtol=1e-12, atol=1e-12)


def test_normalize_clips_and_denormalize_inverts():
    rms = RunningMeanStd((3,), clip=2.0)
    rms.update(torch.tensor([[0.0, 10.0, -5.0], [2.0, 30.0, -1.0], [4.0, 20.0, -3.0]]))
    far = torch.tensor([[1e6, -1e6, 1e6], [-1e6, 1e6, -1e6]])
    out = rms.normalize(far)
    assert torch.equal(out, torch.tensor([[2.0, -2.0, 2.0], [-2.0, 2.0, -2.0]]))
    inside = torch.tensor([[2.5, 21.0, -2.0], [1.0, 15.0, -4.0]])
    z = rms.normalize(inside)
    assert bool((z.abs() < 2.0).all())
    torch.testing.assert_close(rms.denormalize(z), inside, rtol=1e-6, atol=1e-5)
    # and normalisation is (x - mean) / sqrt(var + eps)
    std = torch.sqrt(rms.var + rms.epsilon).float()
    torch.testing.assert_close(z, (inside - rms.mean.float()) / std)


# ------------------------------------------------------------------------------------------ ActorCritic


@pytest.mark.parametrize("separate", [False, True])
def test_actor_critic_shapes(separate):
    torch.manual_seed(0)
    model = ActorCritic(5, 3, [16, 8], separate=separate, init_log_std=-0.7)
    mu, log_std, value = model(torch.randn(11, 5))
    assert mu.shape == (11, 3)
    assert log_std.shape == (11, 3)
    assert value.shape == (11,)
    assert torch.equal(model.log_std.detach(), torch.full((3,), -0.7))
    assert torch.equal(log_std.detach(), torch.full((11, 3), -0.7))
    assert (model.critic_body is not None) == separate


def test_separate_critic_does_not_affect_actor():
    torch.manual_seed(1)
    model = ActorCritic(5, 3, [16, 8], separate=True)
    obs = torch.randn(6, 5)
    with torch.no_grad():
        mu0, _, v0 = model(obs)
        for p in model.critic_body.parameters():
            p.add_(0.5 * torch.randn_like(p))
        mu1, _, v1 = model(obs)
    assert torch.equal(mu0, mu1)
    assert not torch.allclose(v0, v1)


def test_shared_trunk_moves_both_heads():
    torch.manual_seed(2)
    model = ActorCritic(5, 3, [16, 8], separate=False)
    obs = torch.randn(6, 5)
    with torch.no_grad():
        mu0, _, v0 = model(obs)
        for p in model.actor_body.parameters():
            p.add_(0.5 * torch.randn_like(p))
        mu1, _, v1 = model(obs)
    assert not torch.allclose(mu0, mu1)
    assert not torch.allclose(v0, v1)


def test_value_normalisation_round_trip():
    torch.manual_seed(3)
    model = ActorCritic(5, 3, [8], separate=False)
    model.value_norm.update(torch.randn(200) * 7.0 + 30.0)
    values = torch.tensor([-100.0, 0.0, 25.0, 30.0, 1000.0])
    z = model.normalize_value(values)
    assert z.shape == values.shape
    assert not torch.allclose(z, values)  # the statistics are not the identity
    assert float(z[-1]) > 5.0  # value targets are not clipped at the obs clip
    torch.testing.assert_close(model.denormalize_value(z), values, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(model.normalize_value(model.denormalize_value(z)), z, rtol=1e-5, atol=1e-5)


def test_value_normalisation_off_is_identity():
    model = ActorCritic(5, 3, [8], normalize_value=False, normalize_input=False)
    v = torch.tensor([1.0, -2.0, 300.0])
    assert model.value_norm is None and model.obs_norm is None
    assert torch.equal(model.normalize_value(v), v)
    assert torch.equal(model.denormalize_value(v), v)


def test_obs_normaliser_applied_in_forward():
    torch.manual_seed(4)
    model = ActorCritic(4, 2, [8])
    obs = torch.randn(5, 4) * 3 + 1
    with torch.no_grad():
        before = model(obs)[0]
        model.obs_norm.update(torch.randn(100, 4) * 10 + 5)
        after = model(obs)[0]
        expected = model.mu(model.actor_body(model.obs_norm.normalize(obs)))
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, expected)
    assert math.isfinite(float(after.sum()))
