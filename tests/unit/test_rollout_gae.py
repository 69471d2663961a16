"""RolloutBuffer: GAE(lambda) against a hand-written forward-sum reference, and the flat views."""
from __future__ import annotations

import pytest
import torch

from isaac_ppo.agent.rollout import RolloutBuffer

GAMMA, LAM = 0.9, 0.8
T, N = 4, 3

REWARDS = [
    [1.0, 0.5, -1.0],
    [2.0, 0.0, 0.25],
    [-0.5, 1.5, 1.0],
    [0.75, -1.0, 2.0],
]
VALUES = [
    [0.5, 1.0, -0.25],
    [1.5, -0.5, 0.75],
    [0.25, 2.0, 1.25],
    [-1.0, 0.5, 0.5],
]
DONES = [
    [0, 0, 0],
    [1, 0, 0],  # env 0's episode ends at t=1
    [0, 0, 0],
    [0, 0, 1],  # env 2's episode ends at t=3
]
LAST_VALUES = [3.0, -2.0, 10.0]


def _buffer(rewards=REWARDS, values=VALUES, dones=DONES) -> RolloutBuffer:
    t, n = len(rewards), len(rewards[0])
    buf = RolloutBuffer(t, n, num_obs=2, num_actions=1, device=torch.device("cpu"))
    buf.rewards.copy_(torch.tensor(rewards))
    buf.values.copy_(torch.tensor(values))
    buf.dones.copy_(torch.tensor(dones, dtype=torch.float32))
    return buf


def _reference(rewards, values, dones, last_values, gamma, lam):
    """A_t = sum_k (gamma lam)^(k-t) delta_k over k = t .. the end of t's episode (or of the rollout)."""
    t_len, n = len(rewards), len(rewards[0])
    adv = [[0.0] * n for _ in range(t_len)]
    for i in range(n):
        for t in range(t_len):
            total, weight = 0.0, 1.0
            for k in range(t, t_len):
                next_value = values[k + 1][i] if k + 1 < t_len else last_values[i]
                bootstrap = 0.0 if dones[k][i] else gamma * next_value
                delta = rewards[k][i] + bootstrap - values[k][i]
                total += weight * delta
                if dones[k][i]:
                    break
                weight *= gamma * lam
            adv[t][i] = total
    returns = [[adv[t][i] + values[t][i] for i in range(n)] for t in range(t_len)]
    return adv, returns


def test_gae_matches_reference():
    buf = _buffer()
    buf.compute_gae(torch.tensor(LAST_VALUES), GAMMA, LAM)
    adv, ret = _reference(REWARDS, VALUES, DONES, LAST_VALUES, GAMMA, LAM)
    torch.testing.assert_close(buf.advantages, torch.tensor(adv), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(buf.returns, torch.tensor(ret), rtol=1e-6, atol=1e-6)


def test_gae_hand_values():
    buf = _buffer()
    buf.compute_gae(torch.tensor(LAST_VALUES), GAMMA, LAM)
    # env 0, t=1 ends the episode: A = r - V, nothing from t=2 or from the next episode
    assert float(buf.advantages[1, 0]) == pytest.approx(2.0 - 1.5, abs=1e-7)
    # env 0, t=0: delta0 = 1 + 0.9*1.5 - 0.5 = 1.85; A0 = 1.85 + 0.72 * 0.5 = 2.21
    assert float(buf.advantages[0, 0]) == pytest.approx(2.21, abs=1e-6)
    # env 0, t=3 (last step, not done): bootstraps from last_values: 0.75 + 0.9*3 - (-1) = 4.45
    assert float(buf.advantages[3, 0]) == pytest.approx(4.45, abs=1e-6)
    # env 2, t=3 is done: last_values[2] = 10 is not used: A = 2 - 0.5
    assert float(buf.advantages[3, 2]) == pytest.approx(1.5, abs=1e-7)
    # env 1 never ends: its last step bootstraps from last_values[1] = -2: -1 + 0.9*(-2) - 0.5
    assert float(buf.advantages[3, 1]) == pytest.approx(-3.3, abs=1e-6)
    # returns = advantages + values
    assert float(buf.returns[1, 0]) == pytest.approx(2.0, abs=1e-6)


def test_done_cuts_bootstrap_from_next_value():
    """With a done at step t, neither the next value nor anything after t reaches A_t."""
    buf = _buffer()
    buf.compute_gae(torch.tensor(LAST_VALUES), GAMMA, LAM)
    base = buf.advantages.clone()

    values = [row[:] for row in VALUES]
    values[2][0] = 1000.0  # the value right after env 0's done
    rewards = [row[:] for row in REWARDS]
    rewards[3][0] = -50.0  # a reward in env 0's next episode
    other = _buffer(rewards=rewards, values=values)
    other.compute_gae(torch.tensor([-7.0, LAST_VALUES[1], -99.0]), GAMMA, LAM)  # env 2's last value too
    # env 0's first episode (t=0, 1) and all of env 2 (done at the last step) are untouched
    torch.testing.assert_close(other.advantages[:2, 0], base[:2, 0], rtol=0, atol=0)
    torch.testing.assert_close(other.advantages[:, 2], base[:, 2], rtol=0, atol=0)
    # while without the done the same change reaches t=1: +gamma*dV through delta_1's bootstrap and
    # -gamma*lam*dV through delta_2 = r_2 + ... - V_2, i.e. gamma*(1-lam)*dV in all
    no_done = [row[:] for row in DONES]
    no_done[1][0] = 0
    a = _buffer(dones=no_done)
    a.compute_gae(torch.tensor(LAST_VALUES), GAMMA, LAM)
    b = _buffer(values=values, dones=no_done)
    b.compute_gae(torch.tensor(LAST_VALUES), GAMMA, LAM)
    assert float(b.advantages[1, 0] - a.advantages[1, 0]) == pytest.approx(GAMMA * (1 - LAM) * (1000.0 - 0.25), rel=1e-5)


def test_single_step_done_vs_not_done():
    buf = RolloutBuffer(1, 2, 1, 1, torch.device("cpu"))
    buf.rewards[0] = torch.tensor([1.0, 1.0])
    buf.values[0] = torch.tensor([0.5, 0.5])
    buf.dones[0] = torch.tensor([1.0, 0.0])
    buf.compute_gae(torch.tensor([100.0, 100.0]), GAMMA, LAM)
    assert buf.advantages[0].tolist() == pytest.approx([0.5, 1.0 + GAMMA * 100.0 - 0.5])
    assert buf.returns[0].tolist() == pytest.approx([1.0, 1.0 + GAMMA * 100.0])


def test_gae_random_matches_reference():
    g = torch.Generator().manual_seed(0)
    t_len, n = 6, 5
    rewards = torch.randn(t_len, n, generator=g).tolist()
    values = torch.randn(t_len, n, generator=g).tolist()
    dones = (torch.rand(t_len, n, generator=g) < 0.3).float().tolist()
    last = torch.randn(n, generator=g).tolist()
    buf = _buffer(rewards, values, dones)
    buf.compute_gae(torch.tensor(last), 0.99, 0.95)
    adv, ret = _reference(rewards, values, dones, last, 0.99, 0.95)
    torch.testing.assert_close(buf.advantages, torch.tensor(adv), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(buf.returns, torch.tensor(ret), rtol=1e-5, atol=1e-5)


def test_flat_shapes_and_shared_storage():
    buf = RolloutBuffer(T, N, num_obs=5, num_actions=2, device=torch.device("cpu"))
    flat = buf.flat()
    expected = {
        "obs": (T * N, 5), "actions": (T * N, 2), "log_probs": (T * N,), "mu": (T * N, 2),
        "values": (T * N,), "advantages": (T * N,), "returns": (T * N,),
    }
    assert {k: tuple(v.shape) for k, v in flat.items()} == expected
    for name, view in flat.items():
        source = getattr(buf, name)
        assert view.data_ptr() == source.data_ptr(), name
    # writes go both ways; row t*N + i is (t, i)
    flat["obs"][1 * N + 2, 3] = 42.0
    assert float(buf.obs[1, 2, 3]) == 42.0
    buf.advantages[3, 1] = -7.0
    assert float(flat["advantages"][3 * N + 1]) == -7.0
    buf.returns.fill_(2.5)
    assert bool((flat["returns"] == 2.5).all())
    flat["actions"][0] = torch.tensor([9.0, 8.0])
    assert buf.actions[0, 0].tolist() == [9.0, 8.0]


def test_fits():
    buf = RolloutBuffer(T, N, 2, 1, torch.device("cpu"))
    assert buf.fits(T, N)
    assert not buf.fits(N, T)
    assert not buf.fits(T, N + 1)
