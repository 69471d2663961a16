"""What a legged policy is measured by beyond its return (issue 45): its velocity-tracking error, in m/s, in a run's
evaluation rows (evaluation on fresh commands); and the gait check (isaac_ppo.lab.gait) of a legged task, a policy
replayed under the run's physics and under finer physics steps (the same 20 ms control step, deliver 4). Ant's and
Humanoid's gait measures are tests/integration/test_task_semantics.py's and test_study.py's."""
from __future__ import annotations

import math
import os

import pytest

from isaac_ppo.lab.gait import check
from tests.helpers import train_in_process

LEGGED_KEYS = {"checkpoint", "task", "envs", "steps", "base_planar_speed_p50_p90_p99", "base_planar_speed_mean",
               "tracking_error_xy_mps_mean", "yaw_rate_error_radps_mean", "reward_per_step_mean",
               "terminal_contact_env_fraction", "diverged"}


@pytest.fixture(scope="module")
def fresh_anymal_run(tmp_path_factory):
    """One iteration of Anymal training (a freshly initialised policy, saved as a run saves it), evaluated after it
    (a periodic evaluation: TensorBoard's eval/ tags) and at the end, each on 8 envs of 1 s episodes (50 control steps: an untrained policy seldom falls, and 50 s would take
    2500 steps)."""
    return train_in_process(tmp_path_factory.mktemp("runs"), "task=Anymal", "sim=mujoco", "num_envs=32",
                            "agent.horizon=8", "agent.minibatch_size=256", "max_iterations=1",
                            "eval.interval_env_steps=256", "eval.final=true", "eval.num_envs=8",
                            "task.env.learn.episodeLength_s=1", "diagnostics=off", "save_interval_iterations=1")


def test_an_anymal_evaluation_reports_its_mean_velocity_tracking_errors(fresh_anymal_run):
    final = fresh_anymal_run.summary["final_eval"]
    assert final["episodes"] + final["diverged"] == 8
    # each env's first episode's mean error, then the mean over episodes: distances, at most the largest command
    # (|(2, 1)| = 2.24 m/s) plus the speed an untrained policy reaches
    assert 0 < final["tracking_error_xy_mps"] < 4 and 0 < final["yaw_rate_error_radps"] < 3
    # and in TensorBoard, beside the return (eval/<measure>, at the evaluation's env steps)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(os.path.join(fresh_anymal_run.run_dir, "tb"))
    events.Reload()
    tags = events.Tags()["scalars"]
    for name in ("tracking_error_xy_mps", "yaw_rate_error_radps"):
        assert any(tag.endswith("eval/" + name) for tag in tags), (name, tags)


def test_an_anymal_policy_replayed_at_finer_steps_is_measured_by_its_speed_and_tracking(fresh_anymal_run):
    """The fresh policy replayed at the run's physics (implicitfast 4 x 5 ms) and at 2x finer steps (8 x 2.5 ms)
    gives the legged measures, finite, with tracking errors that are distances (>= 0) and a fall share in [0, 1]."""
    last = os.path.join(fresh_anymal_run.run_dir, "checkpoints", "last.pt")
    for refine in (1, 2):
        gait = check(last, "Anymal", envs=8, steps=50, refine=refine)
        assert set(gait) == LEGGED_KEYS
        p50, p90, p99 = gait["base_planar_speed_p50_p90_p99"]
        assert 0 <= p50 <= p90 <= p99 < 10  # (m/s: an untrained policy's base shuffles, it does not run)
        assert gait["tracking_error_xy_mps_mean"] >= 0 and gait["yaw_rate_error_radps_mean"] >= 0
        assert 0 <= gait["terminal_contact_env_fraction"] <= 1 and gait["diverged"] == 0
        assert 0 <= gait["reward_per_step_mean"] <= 1.5 * 0.02  # (the reward lies in [0, 1.5 dt])
        assert all(math.isfinite(v) for v in (gait["base_planar_speed_mean"], gait["tracking_error_xy_mps_mean"],
                                               gait["yaw_rate_error_radps_mean"], gait["reward_per_step_mean"]))
