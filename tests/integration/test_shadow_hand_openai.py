"""ShadowHandOpenAI_FF (issue 88) with known answers, on mujoco.batch: IsaacGymEnvs' task file read as there (20 Hz,
an 8-second episode from resetTime, openai observations with an asymmetric critic, its learner's values), the random
forces on the block (chances log-uniform per env, a decay at IsaacGymEnvs' rate, a draw that replaces the force, the
block's frame turned into the world's, zeroed at a reset), the time-out penalty with maxConsecutiveSuccesses, and
ShadowHand itself untouched by any of it. (Both backends and exact resume: test_backend_contract.py.)"""
from __future__ import annotations

import math

import pytest
import torch

from isaac_ppo.envs import make


def openai_fp(num_envs: int, **kwargs):
    return make("ShadowHandOpenAI_FF", num_envs, sim="mujoco", seed=3, **kwargs)


def test_the_task_file_reads_as_isaacgymenvs_reads_it():
    env = openai_fp(2)
    assert (env.num_obs, env.num_states, env.num_actions) == (42, 211, 20)
    assert env.dt == pytest.approx(3 * 0.01667)  # controlFrequencyInv 3 of sim.dt: 20 Hz
    assert env.max_episode_length == round(8 / (3 * 0.01667)) == 160  # resetTime 8 s replaces episodeLength
    assert env.substeps * env.model.opt.timestep == pytest.approx(env.dt)  # the physics covers the control step
    assert env.randomizer is not None  # (task.randomize: true, as there)
    assert env.max_successes == 50 and env.scales["successTolerance"] == 0.4 and env.scales["fallPenalty"] == -50
    assert openai_fp(2, episodeLength=37, resetTime=-1.0).max_episode_length == 37  # resetTime <= 0: episodeLength


def test_its_learner_is_isaacgymenvs_asymmetric_one():
    from isaac_ppo.config.compose import compose_config

    cfg = compose_config(["task=ShadowHandOpenAI_FF"])
    agent = cfg.agent
    assert agent.name == "ShadowHandOpenAI_FFPPO"
    assert list(agent.network.hidden) == [400, 400, 200, 100] and list(agent.network.critic_hidden) == [512, 512, 256,
                                                                                                      128]
    assert (agent.horizon, agent.minibatch_size, agent.mini_epochs, agent.learning_rate) == (8, 16384, 8, 5e-4)


def test_each_envs_chance_of_a_force_is_log_uniform_in_the_range():
    env = openai_fp(256, task={"randomize": False})
    chance = env.force_prob
    assert float(chance.min()) >= 0.001 and float(chance.max()) <= 0.1
    logs = torch.log10(chance)  # uniform in [-3, -1]: mean -2, standard deviation 2 / sqrt(12)
    assert float(logs.mean()) == pytest.approx(-2.0, abs=0.15)
    assert float(logs.std()) == pytest.approx(2 / math.sqrt(12), abs=0.08)
    assert float((logs < -2).float().mean()) == pytest.approx(0.5, abs=0.1)  # (a uniform chance: 0.05 < 0.5)


def test_a_force_decays_at_isaacgymenvs_rate_a_draw_replaces_it_and_it_acts_in_the_blocks_frame():
    env = openai_fp(2, task={"randomize": False})
    env.reset()
    env.force_prob[:] = torch.tensor([0.0, 1.0])  # env 0 never draws, env 1 always
    env.forces[0] = torch.tensor([1.0, 0.0, 0.0])  # in the block's frame
    at = env.block_qpos + 3
    env.qpos[0, at:at + 4] = torch.tensor([math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)],
                                          dtype=env.qpos.dtype)  # the block turned 90 degrees about z
    env.set_controls(torch.zeros(2, 20), 2)  # (what a step does before its physics)
    decay = 0.99 ** (0.01667 / 0.08)  # per control step: IsaacGymEnvs' self.dt is sim.dt (kept)
    torch.testing.assert_close(env.forces[0], torch.tensor([decay, 0.0, 0.0]))
    world = env.derived["xfrc_applied"][0, env.block_body].float()
    torch.testing.assert_close(world, torch.tensor([0.0, decay, 0.0, 0.0, 0.0, 0.0]), atol=1e-6, rtol=0)  # x -> y
    drawn = env.forces[1].clone()
    assert float(drawn.norm()) > 0 and not torch.equal(drawn, torch.zeros(3))
    env.set_controls(torch.zeros(2, 20), 2)
    assert not torch.equal(env.forces[1], drawn)  # a new draw, not drawn x decay
    mass = float(env.model.body_mass[env.block_body])
    draws = []
    for _ in range(400):
        env.set_controls(torch.zeros(2, 20), 2)
        draws.append(env.forces[1].clone())
    draws = torch.stack(draws) / mass  # N(0, forceScale) per axis
    assert float(draws.mean()) == pytest.approx(0.0, abs=0.15) and float(draws.std()) == pytest.approx(1.0, abs=0.1)


def test_a_reset_zeroes_the_force_and_a_time_out_costs_half_the_fall_penalty():
    env = openai_fp(2, task={"randomize": False})
    env.reset()
    env.forces[:] = 1.0
    env.force_prob[:] = 0.0
    env.make_terminal(0)  # a drop: env 0 resets inside the step
    env.progress[1] = env.max_episode_length - 1  # env 1 times out in the step
    _, reward, resets, extras = env.step(torch.zeros(2, 20))
    assert resets.tolist() == [True, True] and extras["time_outs"].tolist() == [False, True]
    assert env.forces.abs().sum().item() == 0.0
    # IsaacGymEnvs: + 0.5 x fallPenalty on a time-out when maxConsecutiveSuccesses > 0; a fall costs fallPenalty
    assert extras["reward_terms"]["fall_penalty"].tolist() == [-50.0, -25.0]


def test_shadowhand_itself_has_no_forces_and_keeps_its_60_hz_episode():
    env = make("ShadowHand", 2, sim="mujoco", seed=3)
    assert env.force_scale == 0.0 and not hasattr(env, "forces") and "xfrc_applied" not in env.derived
    assert env.dt == pytest.approx(0.01667) and env.max_episode_length == 600
    assert "forces" not in env.state_dict()


def test_the_lstm_task_file_starts_from_the_feed_forward_one_as_isaacgymenvs_does():
    """ShadowHandOpenAI_LSTM.yaml: `defaults: [ShadowHandOpenAI_FF, _self_]` and 8,192 envs, read the same by Hydra
    (the run's config) and by make() (task_files.load_task_file); its agent is IsaacGymEnvs' ShadowHandPPOAsymmLSTM."""
    from isaac_ppo.config.compose import compose_config
    from isaac_ppo.config.files import task_goals

    cfg = compose_config(["task=ShadowHandOpenAI_LSTM"])
    assert cfg.task.name == "ShadowHandOpenAI_LSTM" and cfg.task.env.numEnvs == 8192
    assert cfg.task.env.observationType == "openai" and cfg.task.env.forceScale == 1.0 and cfg.task.task.randomize
    assert "defaults" not in cfg.task
    assert cfg.agent.name == "ShadowHandOpenAI_LSTMPPO" and cfg.agent.network.rnn.name == "lstm"
    assert cfg.agent.network.rnn.units == 1024 and cfg.agent.gamma == 0.998
    env = make("ShadowHandOpenAI_LSTM", 2, sim="mujoco", seed=3, task={"randomize": False})
    assert (env.num_obs, env.num_states, env.max_episode_length) == (42, 211, 160) and env.cfg["env"]["numEnvs"] == 8192
    assert task_goals("ShadowHandOpenAI_LSTM") == ([], {"successes": [1, 10]})  # (inherited)


def test_a_task_file_whose_defaults_name_no_task_file_is_one_line(tmp_path):
    from isaac_ppo.task_files import load_task_file
    from isaac_ppo.errors import UserError

    path = tmp_path / "Mine.yaml"
    path.write_text("defaults:\n  - NoSuchTask\n  - _self_\nname: Mine\n")
    with pytest.raises(UserError, match="defaults entry 'NoSuchTask' names no other task file"):
        load_task_file(str(path))
    path.write_text("defaults:\n  - Mine\nname: Mine\n")  # (itself: a loop)
    with pytest.raises(UserError, match="defaults entry 'Mine' names no other task file"):
        load_task_file(str(path))
