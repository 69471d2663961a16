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


def test_last_return_and_length_per_env():
    tracker = EpisodeTracker(3)
    assert all(math.isnan(v) for v in tracker.last_return.tolist())
    _feed(tracker, REWARDS[:1], RESETS[:1])
    last = tracker.last_return.tolist()
    assert math.isnan(last[0]) and math.isnan(last[1])
    assert last[2] == 3.0
    assert tracker.last_length.tolist() == [0, 0, 1]
    _feed(tracker, REWARDS[1:], RESETS[1:])
    # each env's latest finished episode (env 2's second replaces its first)
    assert tracker.last_return.tolist() == [2.0, 3.5, 3.5]
    assert tracker.last_length.tolist() == [2, 3, 3]
    # draining does not clear them
    tracker.drain()
    assert tracker.last_return.tolist() == [2.0, 3.5, 3.5]


def test_active_subset_touches_only_first_rows():
    tracker = EpisodeTracker(4)
    tracker.update(torch.tensor([1.0, 2.0]), torch.tensor([False, False]))
    tracker.update(torch.tensor([1.0, 2.0]), torch.tensor([True, False]))
    assert tracker.running_return.tolist() == [0.0, 4.0, 0.0, 0.0]
    assert tracker.running_length.tolist() == [0, 2, 0, 0]
    last = tracker.last_return.tolist()
    assert last[0] == 2.0
    assert all(math.isnan(v) for v in last[1:])
    assert tracker.last_length.tolist() == [2, 0, 0, 0]
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
    assert tracker.last_length.tolist() == [2, 1, 1]
