"""SyncCollector on a small fake env: buffer contents, reward scaling, time-out bootstrap, non-finite checks."""
from __future__ import annotations

import math
import re

import pytest
import torch

from isaac_ppo.agent.model import ActorCritic, gaussian_log_prob
from isaac_ppo.loop.collect import NonFiniteError, SyncCollector
from isaac_ppo.errors import UserError
from isaac_ppo.scheduler.plan import Plan

NUM_ENVS, NUM_OBS, NUM_ACTIONS, T = 4, 3, 2, 5
GAMMA, SCALE = 0.9, 0.1

# resets[t][i] and time_outs[t][i] (a time-out is also a reset)
RESETS = [
    [False, False, False, False],
    [True, False, False, True],  # env 0 terminates, env 3 times out
    [False, False, False, False],
    [False, True, True, False],  # env 1 times out, env 2 terminates
    [True, False, False, False],  # env 0 times out
]
TIME_OUTS = [
    [False, False, False, False],
    [False, False, False, True],
    [False, False, False, False],
    [False, True, False, False],
    [True, False, False, False],
]


class FakeEnv:
    """Deterministic observations, rewards (t+1)*(i+1)/4 and a scripted reset/time-out schedule."""

    device = "cpu"
    max_episode_length = 100

    def __init__(self, num_envs=NUM_ENVS, nan_obs_at=None, nan_reward_at=None):
        self.num_envs, self.num_obs, self.num_actions = num_envs, NUM_OBS, NUM_ACTIONS
        self.g = torch.Generator().manual_seed(123)
        self.t = 0
        self.nan_obs_at = nan_obs_at  # (t, env)
        self.nan_reward_at = nan_reward_at
        self.log = []  # per step: dict of what was returned

    def reset(self):
        self.t = 0
        self.reset_obs = torch.randn(self.num_envs, self.num_obs, generator=self.g)
        return {"obs": self.reset_obs.clone()}

    def step(self, actions):
        t = self.t
        assert actions.shape == (self.num_envs, self.num_actions)
        obs = torch.randn(self.num_envs, self.num_obs, generator=self.g)
        final_obs = 5.0 + torch.randn(self.num_envs, self.num_obs, generator=self.g)
        rewards = torch.tensor([(t + 1) * (i + 1) / 4.0 for i in range(self.num_envs)])
        resets = torch.tensor(RESETS[t % len(RESETS)][: self.num_envs])
        time_outs = torch.tensor(TIME_OUTS[t % len(TIME_OUTS)][: self.num_envs])
        if self.nan_obs_at is not None and self.nan_obs_at[0] == t:
            obs[self.nan_obs_at[1], 1] = math.nan
        if self.nan_reward_at is not None and self.nan_reward_at[0] == t:
            rewards[self.nan_reward_at[1]] = math.nan
        self.log.append({
            "actions": actions.clone(), "obs": obs.clone(), "final_obs": final_obs.clone(),
            "rewards": rewards.clone(), "resets": resets.clone(), "time_outs": time_outs.clone(),
        })
        self.t += 1
        return {"obs": obs}, rewards, resets, {"time_outs": time_outs, "final_obs": final_obs}


def _model(seed=0):
    torch.manual_seed(seed)
    model = ActorCritic(NUM_OBS, NUM_ACTIONS, [16, 16])
    # non-trivial normalisers, so that denormalisation matters
    model.obs_norm.update(torch.randn(64, NUM_OBS) * 2 + 1)
    model.value_norm.update(torch.randn(64) * 4 + 10)
    return model


def _collect(env=None, model=None, num_envs=NUM_ENVS, rollout=T):
    env = env or FakeEnv()
    model = model or _model()
    collector = SyncCollector(env, model, GAMMA, SCALE, torch.Generator().manual_seed(7))
    buf, info = collector.collect(Plan(num_envs, rollout, 1, num_envs * rollout))
    return env, model, collector, buf, info


def _value(model, obs):
    with torch.no_grad():
        return model.denormalize_value(model(obs)[2])


def test_collect_fills_buffer():
    env, model, collector, buf, info = _collect()
    assert buf.fits(T, NUM_ENVS)
    assert buf.obs.shape == (T, NUM_ENVS, NUM_OBS)
    # obs[t] is the observation the action of step t was taken from
    torch.testing.assert_close(buf.obs[0], env.reset_obs, rtol=0, atol=0)
    for t in range(1, T):
        torch.testing.assert_close(buf.obs[t], env.log[t - 1]["obs"], rtol=0, atol=0)
    torch.testing.assert_close(collector.obs, env.log[-1]["obs"], rtol=0, atol=0)
    for t in range(T):
        torch.testing.assert_close(buf.actions[t], env.log[t]["actions"], rtol=0, atol=0)
    with torch.no_grad():
        mu, log_std, value = model(buf.obs.view(-1, NUM_OBS))
    torch.testing.assert_close(buf.mu.view(-1, NUM_ACTIONS), mu, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(buf.values.view(-1), model.denormalize_value(value), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        buf.log_probs.view(-1), gaussian_log_prob(buf.actions.view(-1, NUM_ACTIONS), mu, log_std), rtol=1e-5, atol=1e-5
    )
    assert not torch.allclose(buf.actions, buf.mu)  # actions are sampled, not the means
    torch.testing.assert_close(info["last_values"], _value(model, env.log[-1]["obs"]), rtol=1e-5, atol=1e-5)
    assert info["diverged"] == 0


def test_dones_mirror_resets():
    env, _, _, buf, _ = _collect()
    expected = torch.tensor(RESETS, dtype=torch.float32)
    assert torch.equal(buf.dones, expected)


def test_rewards_scaled_and_time_outs_bootstrapped():
    env, model, _, buf, _ = _collect()
    bootstrapped = 0
    for t in range(T):
        step = env.log[t]
        final_values = _value(model, step["final_obs"])
        for i in range(NUM_ENVS):
            expected = float(step["rewards"][i]) * SCALE
            if step["time_outs"][i]:
                expected += GAMMA * float(final_values[i])
                bootstrapped += 1
                # bootstrapped from final_obs, not from the observation after the reset
                alt = float(step["rewards"][i]) * SCALE + GAMMA * float(_value(model, step["obs"])[i])
                assert abs(float(buf.rewards[t, i]) - alt) > 1e-3
            assert float(buf.rewards[t, i]) == pytest.approx(expected, rel=1e-5, abs=1e-6), (t, i)
    assert bootstrapped == 3


def test_no_bootstrap_where_not_timed_out():
    env, _, _, buf, _ = _collect()
    time_outs = torch.tensor(TIME_OUTS)
    for t in range(T):
        for i in range(NUM_ENVS):
            if not time_outs[t, i]:  # including terminations (env 0 at t=1, env 2 at t=3): exactly reward*scale
                assert float(buf.rewards[t, i]) == float(env.log[t]["rewards"][i] * SCALE), (t, i)


def test_tracker_saw_unscaled_rewards():
    env, _, collector, _, info = _collect()
    tracker = collector.tracker
    r = [[float(env.log[t]["rewards"][i]) for i in range(NUM_ENVS)] for t in range(T)]
    # finished episodes, unscaled: env0 t0..1, env3 t0..1, env1 t0..3, env2 t0..3, env0 t2..4
    finished = [
        r[0][0] + r[1][0], r[0][3] + r[1][3], sum(r[t][1] for t in range(4)), sum(r[t][2] for t in range(4)),
        r[2][0] + r[3][0] + r[4][0],
    ]
    # episodes still running: env 3 since t=2, env 1 and env 2 at t=4
    assert tracker.running_return.tolist() == pytest.approx([0.0, r[4][1], r[4][2], r[2][3] + r[3][3] + r[4][3]])
    assert tracker.running_length.tolist() == [0, 1, 1, 3]
    # the batch's info carries the episodes that ended in it (drained from the tracker)
    assert info["episodes"] == 5
    assert info["batch_mean_return"] == pytest.approx(sum(finished) / 5)
    assert tracker.drain()["episodes"] == 0
    assert info["batch_mean_length"] == pytest.approx((2 + 2 + 4 + 4 + 3) / 5)
    # the window (the last 100 finished episodes) holds all five so far
    assert info["window_episodes"] == 5
    assert info["window_mean_return"] == pytest.approx(sum(finished) / 5)
    assert info["window_mean_length"] == pytest.approx((2 + 2 + 4 + 4 + 3) / 5)


def test_buffer_reused_for_same_plan_and_obs_carried_over():
    env = FakeEnv()
    model = _model()
    collector = SyncCollector(env, model, GAMMA, SCALE, torch.Generator().manual_seed(7))
    plan = Plan(NUM_ENVS, T, 1, NUM_ENVS * T)
    buf1, _ = collector.collect(plan)
    first = buf1
    buf2, _ = collector.collect(plan)
    assert buf2 is first
    torch.testing.assert_close(buf2.obs[0], env.log[T - 1]["obs"], rtol=0, atol=0)
    assert len(env.log) == 2 * T
    buf3, _ = collector.collect(plan, slot=1)  # the second slot: the buffer filled during an update
    assert buf3 is not first


def test_plan_with_fewer_envs_needs_set_active():
    collector = SyncCollector(FakeEnv(), _model(), GAMMA, SCALE, torch.Generator().manual_seed(7))
    with pytest.raises(UserError, match="num_envs=2"):
        collector.collect(Plan(2, T, 1, 2 * T))


def test_nan_observation_names_env():
    env = FakeEnv(nan_obs_at=(1, 2))  # returned by step 1, stored at buf.obs[2]
    with pytest.raises(NonFiniteError) as info:
        _collect(env=env)
    msg = str(info.value)
    assert "observation" in msg
    ids = re.search(r"env ids ([^:]*)", msg)
    assert ids is not None, msg
    assert ids.group(1).strip() == "2"


def test_nan_observation_several_envs():
    class TwoNan(FakeEnv):
        def step(self, actions):
            out = super().step(actions)
            if self.t == 3:
                out[0]["obs"][0, 0] = math.inf
                out[0]["obs"][3, 2] = math.nan
            return out

    with pytest.raises(NonFiniteError) as info:
        _collect(env=TwoNan())
    ids = re.search(r"env ids ([^:]*)", str(info.value)).group(1)
    assert [s.strip() for s in ids.split(",")] == ["0", "3"]


def test_nan_reward_raises():
    env = FakeEnv(nan_reward_at=(2, 1))
    with pytest.raises(NonFiniteError, match="reward"):
        _collect(env=env)
    assert issubclass(NonFiniteError, UserError)


def test_finite_collect_does_not_raise():
    # control for the two tests above: the same env without injected values collects fine
    _, _, _, buf, _ = _collect(env=FakeEnv(nan_obs_at=None, nan_reward_at=None))
    assert bool(torch.isfinite(buf.obs).all()) and bool(torch.isfinite(buf.rewards).all())


class TerminalObsEnv(FakeEnv):
    """Isaac Gym's semantics: the obs returned with a reset flag is the terminal one (no final_obs)."""

    def step(self, actions):
        obs_dict, rewards, resets, extras = super().step(actions)
        return obs_dict, rewards, resets, {"time_outs": extras["time_outs"]}


class CountingModel(ActorCritic):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rows_evaluated = 0

    def forward(self, obs):
        self.rows_evaluated += obs.shape[0]
        return super().forward(obs)


def test_without_final_obs_the_time_out_value_is_the_next_steps_own():
    """An env whose returned obs is the terminal one (Isaac Gym) costs one forward pass per step, no critic pass
    for time-outs, and bootstraps each time-out with the value of that obs (the last step's from last_values)."""
    torch.manual_seed(0)
    model = CountingModel(NUM_OBS, NUM_ACTIONS, [16, 16])
    model.obs_norm.update(torch.randn(64, NUM_OBS) * 2 + 1)
    model.value_norm.update(torch.randn(64) * 4 + 10)
    env, model, _, buf, info = _collect(env=TerminalObsEnv(), model=model)
    assert model.rows_evaluated == (T + 1) * NUM_ENVS  # T steps and the last values: nothing else
    for t in range(T):
        log = env.log[t]
        next_value = _value(model, log["obs"])
        expected = log["rewards"] * SCALE + GAMMA * next_value * log["time_outs"].float()
        torch.testing.assert_close(buf.rewards[t], expected, rtol=1e-5, atol=1e-5)
    assert bool(env.log[-1]["time_outs"].any())  # the last step's time-out is bootstrapped from last_values
    torch.testing.assert_close(info["last_values"], _value(model, env.log[-1]["obs"]), rtol=1e-5, atol=1e-5)
