"""BackgroundCollection on the real MuJoCo Cartpole: the snapshot policy, buffer slots, equality with a
synchronous collection, and errors handed to the main thread."""
from __future__ import annotations

import copy

import pytest
import torch

from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.loop.collect import BackgroundCollection, NonFiniteError, SyncCollector
from isaac_ppo.envs import make
from isaac_ppo.scheduler import Plan

PLAN = Plan(16, 8, 1, 128, "concurrent")


def _setup(seed=0):
    torch.manual_seed(seed)
    env = make("Cartpole", 16, sim="mujoco", seed=seed)
    model = ActorCritic(env.num_obs, env.num_actions, [32, 32])
    collector = SyncCollector(env, model, 0.99, 0.1, torch.Generator().manual_seed(11))
    return env, model, collector


def test_batch_is_collected_with_the_snapshot_while_the_live_model_changes():
    env, model, collector = _setup()
    snapshot = copy.deepcopy(model)
    background = BackgroundCollection(collector, model)
    background.start(PLAN, model, policy_version=3, slot=1)
    with torch.no_grad():  # the "update" on the main thread, while the batch is being collected
        for p in model.parameters():
            p.add_(0.5)
    batch = background.wait()
    assert not background.running
    assert (batch.policy_version, batch.slot, batch.plan, batch.concurrent) == (3, 1, PLAN, True)
    assert batch.buffer is collector.buffers[1] and collector.buffers[0] is None
    with torch.no_grad():
        mu, log_std, _ = snapshot(batch.buffer.obs)
        live_mu = model(batch.buffer.obs)[0]
    torch.testing.assert_close(batch.buffer.mu, mu, rtol=0, atol=0)  # behaviour = the snapshot
    torch.testing.assert_close(batch.buffer.log_std, log_std[0, 0], rtol=0, atol=0)
    assert (batch.buffer.mu - live_mu).abs().max() > 1e-3  # ... not the live model


def test_background_batch_equals_a_synchronous_one():
    """The thread changes when a batch is collected, not what is in it."""
    _, model_a, sync = _setup()
    _, model_b, threaded = _setup()
    model_b.load_state_dict(model_a.state_dict())
    for _ in range(2):  # two batches: the env state runs on across them
        buf_a, info_a = sync.collect(PLAN, model_a)
        background = BackgroundCollection(threaded, model_b)
        background.start(PLAN, model_b, policy_version=0, slot=0)
        batch = background.wait()
        for name in ("obs", "actions", "log_probs", "mu", "values", "rewards", "dones"):
            torch.testing.assert_close(getattr(batch.buffer, name), getattr(buf_a, name), rtol=0, atol=0)
        torch.testing.assert_close(batch.info["last_values"], info_a["last_values"], rtol=0, atol=0)
        assert batch.info["episodes"] == info_a["episodes"]


class NanEnv:
    device, num_envs, num_obs, num_actions = "cpu", 4, 3, 1

    def reset(self):
        return {"obs": torch.zeros(4, 3)}

    def step(self, actions):
        obs = torch.zeros(4, 3)
        obs[2, 1] = float("nan")
        return {"obs": obs}, torch.zeros(4), torch.zeros(4, dtype=torch.bool), {"time_outs": torch.zeros(4, dtype=torch.bool)}


def test_an_error_on_the_thread_is_raised_by_wait():
    model = ActorCritic(3, 1, [8])
    collector = SyncCollector(NanEnv(), model, 0.99, 1.0, torch.Generator().manual_seed(0))
    background = BackgroundCollection(collector, model)
    background.start(Plan(4, 2, 1, 8, "concurrent"), model, policy_version=0, slot=1)
    with pytest.raises(NonFiniteError, match="env ids 2"):
        background.wait()
    assert not background.running
