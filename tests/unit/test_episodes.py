"""Episode bookkeeping (isaac_ppo.envs.episodes.EpisodeTracker) on hand-made reward/reset sequences."""
from __future__ import annotations

import math

import pytest
import torch

from isaac_ppo.envs.episodes import EpisodeTracker

# 3 envs, 4 steps; rewards chosen to be exact in binary floating point.
REWARDS = [
    [1.0, 2.0, 3.0],
    [1.0, 1.0, 1.0],
    [0.5, 0.5, 0.5],
    [2.0, 2.0, 2.0],
]
RESETS = [
    [False, False, True],  # env 2 ends: return 3, length 1
    [True, False, False],  # env 0 ends: return 1 + 1 = 2, length 2
    [False, True, False],  # env 1 ends: return 2 + 1 + 0.5 = 3.5, length 3
    [False, False, True],  # env 2 ends: return 1 + 0.5 + 2 = 3.5, length 3
]


def _feed(tracker, rewards, resets, reset_dtype=torch.bool):
    for r, d in zip(rewards, resets):
        tracker.update(torch.tensor(r, dtype=torch.float32), torch.tensor(d).to(reset_dtype))


def test_drain_exact_counts_and_means():
    tracker = EpisodeTracker(3)
    _feed(tracker, REWARDS, RESETS)
    stats = tracker.drain()
    assert stats["episodes"] == 4
    assert isinstance(stats["episodes"], int)
    assert stats["mean_return"] == pytest.approx((3 + 2 + 3.5 + 3.5) / 4)  # 3.0
    assert stats["mean_length"] == pytest.approx((1 + 2 + 3 + 3) / 4)  # 2.25


def test_long_resets_as_isaacgym_gives_them():
    tracker = EpisodeTracker(3)
    _feed(tracker, REWARDS, RESETS, reset_dtype=torch.long)
    stats = tracker.drain()
    assert stats["episodes"] == 4
    assert stats["mean_return"] == pytest.approx(3.0)
    assert stats["mean_length"] == pytest.approx(2.25)


def test_running_figures_after_sequence():
    tracker = EpisodeTracker(3)
    _feed(tracker, REWARDS, RESETS)
    # env 0: 0.5 + 2 over 2 steps; env 1: 2 over 1 step; env 2 just ended
    assert tracker.running_return.tolist() == [2.5, 2.0, 0.0]
    assert tracker.running_length.tolist() == [2, 1, 0]


def test_second_drain_with_nothing_finished():
    tracker = EpisodeTracker(3)
    _feed(tracker, REWARDS, RESETS)
    tracker.drain()
    stats = tracker.drain()
    assert stats["episodes"] == 0
    assert math.isnan(stats["mean_return"])
    assert math.isnan(stats["mean_length"])
    # steps with no reset still leave nothing to drain
    tracker.update(torch.ones(3), torch.zeros(3, dtype=torch.bool))
    stats = tracker.drain()
    assert stats["episodes"] == 0
    assert math.isnan(stats["mean_return"])


def test_drain_only_counts_episodes_since_last_drain():
    tracker = EpisodeTracker(3)
    _feed(tracker, REWARDS, RESETS)
    tracker.drain()
    # env 0 carries 2.5 over 2 steps; one more step of 1.5 ends it: return 4, length 3
    tracker.update(torch.tensor([1.5, 0.0, 0.0]), torch.tensor([True, False, False]))
    stats = tracker.drain()
    assert stats["episodes"] == 1
    assert stats["mean_return"] == pytest.approx(4.0)
    assert stats["mean_length"] == pytest.approx(3.0)


def test_fresh_tracker_drains_nothing():
    stats = EpisodeTracker(5).drain()
    assert stats["episodes"] == 0
    assert math.isnan(stats["mean_return"])
    assert math.isnan(stats["mean_length"])


def test_window_is_the_last_k_finished_episodes_over_all_envs():
    tracker = EpisodeTracker(3, window=3)
    assert tracker.recent() == {"mean_return": pytest.approx(math.nan, nan_ok=True),
                                "mean_length": pytest.approx(math.nan, nan_ok=True), "episodes": 0}
    _feed(tracker, REWARDS[:1], RESETS[:1])  # env 2's episode: return 3, length 1
    assert tracker.recent() == {"mean_return": 3.0, "mean_length": 1.0, "episodes": 1}
    _feed(tracker, REWARDS[1:], RESETS[1:])  # then 2 (length 2), 3.5 (3), 3.5 (3): the first drops out
    assert tracker.recent() == {"mean_return": pytest.approx((2 + 3.5 + 3.5) / 3), "mean_length": pytest.approx(8 / 3),
                                "episodes": 3}
    tracker.drain()  # draining the batch's totals leaves the window alone
    assert tracker.recent()["episodes"] == 3


def test_window_keeps_the_last_k_when_more_end_in_one_step():
    tracker = EpisodeTracker(5, window=3)
    tracker.update(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), torch.ones(5, dtype=torch.bool))
    # five end at once: the last three in env order (3, 4, 5), each in its own slot
    assert sorted(tracker.recent_returns[:3].tolist()) == [3.0, 4.0, 5.0]
    assert tracker.recent()["mean_return"] == pytest.approx(4.0)
    tracker.update(torch.tensor([10.0, 0.0, 0.0, 0.0, 20.0]), torch.tensor([True, False, False, False, True]))
    assert tracker.recent()["mean_return"] == pytest.approx((5 + 10 + 20) / 3)


def test_window_leaves_out_diverged_episodes_and_survives_a_checkpoint():
    tracker = EpisodeTracker(3, window=4)
    excluded = torch.tensor([False, True, False])
    tracker.update(torch.tensor([1.0, -1e7, 2.0]), torch.ones(3, dtype=torch.bool), excluded)
    assert tracker.recent() == {"mean_return": 1.5, "mean_length": 1.0, "episodes": 2}
    restored = EpisodeTracker(3, window=4)
    restored.load_state_dict(tracker.state_dict())
    assert restored.recent() == tracker.recent()
    other_size = EpisodeTracker(3, window=8)  # agent.games_to_track changed on resume: a new window
    other_size.load_state_dict(tracker.state_dict())
    assert other_size.recent()["episodes"] == 0
    assert other_size.running_return.tolist() == tracker.running_return.tolist()


def test_active_subset_touches_only_first_rows():
    tracker = EpisodeTracker(4)
    tracker.update(torch.tensor([1.0, 2.0]), torch.tensor([False, False]))
    tracker.update(torch.tensor([1.0, 2.0]), torch.tensor([True, False]))
    assert tracker.running_return.tolist() == [0.0, 4.0, 0.0, 0.0]
    assert tracker.running_length.tolist() == [0, 2, 0, 0]
    assert tracker.recent() == {"mean_return": 2.0, "mean_length": 2.0, "episodes": 1}
    stats = tracker.drain()
    assert stats["episodes"] == 1
    assert stats["mean_return"] == pytest.approx(2.0)
    assert stats["mean_length"] == pytest.approx(2.0)


def test_active_subset_then_full_pool():
    tracker = EpisodeTracker(3)
    tracker.update(torch.tensor([1.0]), torch.tensor([False]))  # only env 0 active
    tracker.update(torch.tensor([1.0, 1.0, 1.0]), torch.tensor([True, True, True]))
    stats = tracker.drain()
    assert stats["episodes"] == 3
    assert stats["mean_return"] == pytest.approx((2 + 1 + 1) / 3)
    assert stats["mean_length"] == pytest.approx((2 + 1 + 1) / 3)


def _divergence_limit(fraction=0.05):
    from omegaconf import OmegaConf

    from isaac_ppo.envs.episodes import DivergenceLimit

    return DivergenceLimit(OmegaConf.create({"max_diverged_fraction": fraction,
                                             "task": {"env": {"powerScale": 1.0}, "mujoco": {"timestep": 0.01}}}))


def test_the_divergence_guard_judges_a_rate_not_a_burst():
    """Late in a trained Ant run (~70 episodes an iteration), bursts of up to 5 divergences (7% of an iteration)
    at about 2% overall do not stop it; a sustained 10% does, once 400 episodes are in the window."""
    from isaac_ppo.errors import DivergedError

    limit = _divergence_limit()
    bursts = [0, 1, 0, 5, 0, 2, 0, 0, 3, 0, 1, 0] * 10  # 144 in 120 iterations of 70 episodes: 1.7%
    for k, diverged in enumerate(bursts):
        limit.check({"iteration": k, "diverged": diverged, "episodes": 70 - diverged})
    limit = _divergence_limit()
    with pytest.raises(DivergedError, match=r"diverged in 42 of 420 episodes \(10%\) of iterations 0-5"):
        for k in range(20):
            limit.check({"iteration": k, "diverged": 7, "episodes": 63})
    allowed = _divergence_limit(1.0)
    for k in range(20):
        allowed.check({"iteration": k, "diverged": 70, "episodes": 0})
