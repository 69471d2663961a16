"""The contract's critic observations (IsaacGymEnvs' "states"; asymmetric actor-critic): the critic sees them, the
actor never does; they travel through collection, the buffer, the update and its normaliser, the Isaac Gym adapter,
rl-games' central value config and export (actor only). Off (num_states 0) nothing changes: tests/integration/
test_golden.py holds that bit for bit."""
from __future__ import annotations

import math

import pytest
import torch

from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.agent.ppo import PPO
from isaac_ppo.envs.contract import num_states
from isaac_ppo.envs.isaacgym import IsaacGymVecEnv
from isaac_ppo.export import DeterministicPolicy
from isaac_ppo.loop.collect import SyncCollector
from isaac_ppo.scheduler.plan import Plan

NUM_ENVS, NUM_OBS, NUM_STATES, NUM_ACTIONS, T = 4, 3, 5, 2, 6
GAMMA = 0.9
AGENT = {"learning_rate": 1e-3, "mixed_precision": False, "normalize_advantage": True, "clip": 0.2,
         "clip_value": True, "critic_coef": 2.0, "entropy_coef": 0.0, "bounds_loss_coef": 0.0,
         "truncate_grads": True, "grad_norm": 1.0, "lr_schedule": "constant", "kl_threshold": 0.008,
         "stale_correction": "none", "stale_update": "current", "stale_clip": "behaviour"}


class AsymmetricEnv:
    """Random observations and critic observations (states far from the observations' scale); env 1 times out at
    step 2 with final observations and states of their own."""

    device = "cpu"
    max_episode_length = 100
    num_envs, num_obs, num_states, num_actions = NUM_ENVS, NUM_OBS, NUM_STATES, NUM_ACTIONS

    def __init__(self):
        self.g = torch.Generator().manual_seed(7)
        self.t = 0
        self.log = []

    def _draw(self):
        return {"obs": torch.randn(NUM_ENVS, NUM_OBS, generator=self.g),
                "states": 10.0 + 3.0 * torch.randn(NUM_ENVS, NUM_STATES, generator=self.g)}

    def reset(self):
        self.t = 0
        self.first = self._draw()
        return {k: v.clone() for k, v in self.first.items()}

    def step(self, actions):
        out = self._draw()
        final = self._draw()
        time_outs = torch.zeros(NUM_ENVS, dtype=torch.bool)
        if self.t == 2:
            time_outs[1] = True
        final_obs = torch.where(time_outs[:, None], final["obs"], out["obs"])
        final_states = torch.where(time_outs[:, None], final["states"], out["states"])
        extras = {"time_outs": time_outs, "final_obs": final_obs, "final_states": final_states}
        self.log.append({"out": out, "extras": extras})
        self.t += 1
        return out, torch.ones(NUM_ENVS), time_outs.clone(), extras


def model():
    torch.manual_seed(0)
    return ActorCritic(NUM_OBS, NUM_ACTIONS, [16, 16], num_states=NUM_STATES)


def test_the_critic_sees_the_states_and_the_actor_never_does():
    net = model()
    obs = torch.randn(8, NUM_OBS, requires_grad=True)
    states = torch.randn(8, NUM_STATES, requires_grad=True)
    mu, _, value = net(obs, states)
    assert torch.autograd.grad(mu.sum(), states, allow_unused=True)[0] is None  # no path from states to the actor
    assert torch.autograd.grad(value.sum(), obs, allow_unused=True)[0] is None  # the critic reads the states alone
    assert torch.autograd.grad(value.sum(), states)[0].abs().sum() > 0
    with torch.no_grad():  # perturbation: other states, the same actions, another value
        mu2, _, value2 = net(obs, states + torch.randn(8, NUM_STATES))
        assert torch.equal(mu2, mu) and not torch.allclose(value2, value)
        assert net(obs)[2] is None and torch.equal(net(obs)[0], mu)  # the actor alone needs no states
    assert net.critic_body[0].in_features == NUM_STATES and net.actor_body[0].in_features == NUM_OBS
    assert net.state_norm is not None and "state_norm.mean" in net.state_dict()


def test_a_critic_of_its_own_widths_reads_the_states_and_the_actor_keeps_its_own():
    # IsaacGymEnvs' ShadowHandPPOAsymm: actor [400, 400, 200, 100], central value [512, 512, 256, 128] (here small)
    net = ActorCritic(NUM_OBS, NUM_ACTIONS, [8, 4], num_states=NUM_STATES, critic_hidden=[16, 12, 6])
    widths = lambda body: [(m.in_features, m.out_features) for m in body if isinstance(m, torch.nn.Linear)]
    assert widths(net.actor_body) == [(NUM_OBS, 8), (8, 4)] and net.mu.in_features == 4
    assert widths(net.critic_body) == [(NUM_STATES, 16), (16, 12), (12, 6)] and net.value.in_features == 6
    mu, _, value = net(torch.randn(3, NUM_OBS), torch.randn(3, NUM_STATES))
    assert mu.shape == (3, NUM_ACTIONS) and value.shape == (3,)
    # a critic that shares the actor's trunk has no widths of its own to take
    assert ActorCritic(NUM_OBS, NUM_ACTIONS, [8, 4], critic_hidden=[16]).critic_body is None


def test_off_by_default_the_model_is_unchanged():
    torch.manual_seed(0)
    plain = ActorCritic(NUM_OBS, NUM_ACTIONS, [16, 16])
    assert plain.num_states == 0 and plain.state_norm is None and plain.critic_body is None
    assert not any(name.startswith("state_norm") for name in plain.state_dict())
    assert num_states(object()) == 0


def test_collection_stores_the_states_and_bootstraps_time_outs_from_the_final_ones():
    env, net = AsymmetricEnv(), model()
    collector = SyncCollector(env, net, GAMMA, 1.0, torch.Generator().manual_seed(1))
    buf, info = collector.collect(Plan(NUM_ENVS, T, 1, NUM_ENVS * T))
    assert buf.states.shape == (T, NUM_ENVS, NUM_STATES)
    assert torch.equal(buf.states[0], env.first["states"])
    for t in range(1, T):
        assert torch.equal(buf.states[t], env.log[t - 1]["out"]["states"])
        assert torch.equal(buf.obs[t], env.log[t - 1]["out"]["obs"])
    with torch.no_grad():
        values = torch.stack([net.denormalize_value(net(buf.obs[t], buf.states[t])[2]) for t in range(T)])
        assert torch.allclose(buf.values, values)
        extras = env.log[2]["extras"]
        bootstrap = net.denormalize_value(net(extras["final_obs"][1:2], extras["final_states"][1:2])[2])
    assert torch.isclose(buf.rewards[2, 1], 1.0 + GAMMA * bootstrap[0])
    assert torch.equal(collector.states, env.log[-1]["out"]["states"])
    assert buf.flat()["states"].shape == (T * NUM_ENVS, NUM_STATES)


def test_the_update_trains_the_critic_on_the_states_and_their_normaliser_absorbs_the_batch():
    env, net = AsymmetricEnv(), model()
    collector = SyncCollector(env, net, GAMMA, 1.0, torch.Generator().manual_seed(1))
    plan = Plan(NUM_ENVS, T, 2, NUM_ENVS * T // 2)
    buf, info = collector.collect(plan)
    buf.compute_gae(info["last_values"], GAMMA, 0.95)
    ppo = PPO(net, AGENT, torch.device("cpu"), torch.Generator().manual_seed(2))
    critic_before = net.critic_body[0].weight.detach().clone()
    stats = ppo.update(buf, plan)
    assert math.isfinite(stats["critic_loss"]) and not torch.equal(net.critic_body[0].weight, critic_before)
    ppo.absorb_batch_statistics(buf)
    states = buf.states.view(-1, NUM_STATES).double()
    assert torch.allclose(net.state_norm.mean, states.mean(0), atol=1e-4)  # (after a prior of count 1e-5)
    assert torch.allclose(net.obs_norm.mean, buf.obs.view(-1, NUM_OBS).double().mean(0), atol=1e-4)


def test_the_exported_policy_takes_the_observation_alone():
    net = model().eval()
    policy = DeterministicPolicy(net, math.inf, 1.0)
    obs = torch.randn(5, NUM_OBS)
    with torch.no_grad():
        assert torch.equal(policy(obs), net(obs)[0].clamp(-1.0, 1.0))
    assert not any("critic" in name or "state_norm" in name for name in policy.state_dict())


class AsymmetricVecTask:
    """IsaacGymEnvs' VecTask with num_states (its asymmetric tasks): obs_dict carries "states"."""

    num_envs, num_obs, num_acts, num_states = 4, 2, 1, 3
    rl_device = "cpu"
    max_episode_length = 10

    def _obs(self):
        base = torch.arange(self.num_envs, dtype=torch.float32)[:, None]
        return {"obs": base.expand(-1, 2).clone(), "states": 100 + base.expand(-1, 3).clone()}

    def reset(self):
        return self._obs()

    def step(self, actions):
        n = self.num_envs
        return self._obs(), torch.zeros(n), torch.zeros(n, dtype=torch.long), {"time_outs": torch.zeros(n, dtype=torch.bool)}


def test_the_isaac_gym_adapter_passes_the_states_on_for_the_active_envs():
    env = IsaacGymVecEnv(AsymmetricVecTask())
    assert env.num_states == 3
    assert env.reset()["states"].shape == (4, 3)
    assert torch.equal(env.set_active(2)["states"], torch.tensor([[100.0] * 3, [101.0] * 3]))
    obs_dict = env.step(torch.zeros(2, 1))[0]
    assert set(obs_dict) == {"obs", "states"} and obs_dict["states"].shape == (2, 3)


def test_rl_games_gets_a_central_value_on_the_states():
    pytest.importorskip("hydra")
    from isaac_ppo.config.compose import compose_config
    from isaac_ppo.loop.rlgames import build_params

    cfg = compose_config(["task=Cartpole", "sim=mujoco", "max_iterations=1"])
    plain = build_params(cfg, 64, "/tmp/run")["config"]
    central = build_params(cfg, 64, "/tmp/run", states=7)["config"]
    assert "central_value_config" not in plain
    value = central["central_value_config"]
    assert value["network"]["central_value"] is True and value["network"]["mlp"]["units"] == [32, 32]
    assert value["minibatch_size"] == central["minibatch_size"] and value["learning_rate"] == central["learning_rate"]
    # a critic of its own widths (IsaacGymEnvs' ShadowHandPPOAsymm: central value [512, 512, 256, 128])
    cfg = compose_config(["task=Cartpole", "sim=mujoco", "max_iterations=1",
                          "agent.network.separate=true", "agent.network.critic_hidden=[64,16]"])
    own = build_params(cfg, 64, "/tmp/run", states=7)
    assert own["config"]["central_value_config"]["network"]["mlp"]["units"] == [64, 16]
    assert own["network"]["mlp"]["units"] == [32, 32]  # (the actor's)
