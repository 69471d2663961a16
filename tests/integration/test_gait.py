"""The gait check (isaac_ppo.lab.gait) on a legged task: a policy replayed under the run's physics and under finer
physics steps (the same 20 ms control step) is measured by the legged family's quantities (issue 45 deliver 4);
Ant's and Humanoid's measures are tests/integration/test_task_semantics.py's and test_study.py's."""
from __future__ import annotations

import glob
import math
import os

from isaac_ppo.lab.gait import check
from tests.helpers import train_in_process

LEGGED_KEYS = {"checkpoint", "task", "envs", "steps", "base_planar_speed_p50_p90_p99", "base_planar_speed_mean",
               "tracking_error_xy_mps_mean", "yaw_rate_error_radps_mean", "reward_per_step_mean",
               "terminal_contact_env_fraction", "diverged"}


def test_an_anymal_policy_replayed_at_finer_steps_is_measured_by_its_speed_and_tracking(tmp_path):
    """A freshly initialised Anymal policy (one iteration of training, saved as a run saves it) replayed at the
    run's physics (implicitfast 4 x 5 ms) and at 2x finer steps (8 x 2.5 ms) gives the legged measures, finite,
    with tracking errors that are distances (>= 0) and a fall share in [0, 1]."""
    run = train_in_process(tmp_path, "task=Anymal", "sim=mujoco", "num_envs=32", "agent.horizon=8",
                           "agent.minibatch_size=256", "max_iterations=1", "eval.interval_env_steps=0",
                           "eval.final=false", "diagnostics=off", "save_interval_iterations=1")
    last = os.path.join(run.run_dir, "checkpoints", "last.pt")
    assert os.path.isfile(last), glob.glob(os.path.join(run.run_dir, "**"), recursive=True)
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
