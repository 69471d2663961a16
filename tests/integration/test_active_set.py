"""The active set changing under a real MuJoCo env: paused envs keep their episodes (state, progress and
running return) and the episode statistics of each batch stay exact as the set shrinks and grows."""
from __future__ import annotations

import math

import torch

from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.loop.collect import SyncCollector
from isaac_ppo.envs import make
from isaac_ppo.scheduler import Plan

POOL = 8


class Recorder:
    """The env, with every step's active count, rewards and resets written down."""

    def __init__(self, env):
        self.env, self.steps = env, []

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, actions):
        obs, rewards, resets, extras = self.env.step(actions)
        self.steps.append((actions.shape[0], rewards.double().clone(), resets.clone()))
        return obs, rewards, resets, extras


def test_episode_statistics_stay_exact_as_the_active_set_shrinks_and_grows():
    env = Recorder(make("Cartpole", POOL, sim="mujoco", seed=3))
    torch.manual_seed(0)
    model = ActorCritic(env.num_obs, env.num_actions, [16], init_log_std=0.5)
    collector = SyncCollector(env, model, 0.99, 1.0, torch.Generator().manual_seed(1))
    running = [0.0] * POOL
    length = [0] * POOL
    ended = []  # every finished episode's return, in the order they ended (env order within a step)
    spanned_a_pause = 0
    paused_since = {}
    for active in (8, 3, 8, 5, 2, 8):
        before = len(env.steps)
        _, info = collector.collect(Plan(active, 40, 1, active * 40))
        finished = []
        for n, rewards, resets in env.steps[before:]:
            assert n == active
            for i in range(n):
                running[i] += float(rewards[i])
                length[i] += 1
                if resets[i]:
                    finished.append(running[i])
                    assert length[i] <= env.max_episode_length  # paused steps never counted as progress
                    spanned_a_pause += i in paused_since
                    paused_since.pop(i, None)
                    ended.append(running[i])
                    running[i], length[i] = 0.0, 0
        for i in range(active, POOL):
            paused_since.setdefault(i, before)  # envs left out of this batch are paused mid-episode
        assert info["episodes"] == len(finished)
        if finished:
            assert math.isclose(info["batch_mean_return"], sum(finished) / len(finished), rel_tol=1e-12)
        window = ended[-100:]  # the last games_to_track (default 100) episodes, whichever envs played them
        assert info["window_episodes"] == len(window)
        assert math.isclose(info["window_mean_return"], sum(window) / len(window), rel_tol=1e-12)
        tracked = collector.tracker.running_return.tolist()
        assert all(math.isclose(tracked[i], running[i], rel_tol=1e-12, abs_tol=1e-12) for i in range(POOL))
    assert spanned_a_pause > 0  # some episodes were paused with their env and finished after it came back
