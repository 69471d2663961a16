"""The console progress line and metrics.jsonl of a run's first iterations, before and after an episode ends."""
import json
import math
import types

from isaac_ppo.io.logger import RunLogger, iteration_row

PLAN = types.SimpleNamespace(num_envs=8, rollout_length=4, epochs=2, minibatch_size=16, mode="sync")


def row(iteration, window_return, window_length, episodes):
    ended = {"episodes": episodes, "batch_mean_return": window_return, "batch_mean_length": window_length,
             "window_episodes": episodes, "window_mean_return": window_return, "window_mean_length": window_length,
             "diverged": 0}
    return iteration_row(iteration, (iteration + 1) * 32, 1.0, PLAN, 32, 0, ended, 0.5, 0.25, 1.0)


def test_the_progress_line_shows_a_dash_until_an_episode_has_ended_and_the_row_holds_null(tmp_path, capsys):
    logger = RunLogger(str(tmp_path), "Toy", max_iterations=2).begin()
    logger.log(row(0, math.nan, math.nan, 0))  # no episode has ended yet: the window is empty
    logger.log(row(1, 12.5, 30.0, 3))
    logger.close()
    first, second = capsys.readouterr().out.splitlines()[-2:]
    assert "| train return - | length - |" in first and "nan" not in first
    assert "| train return 12.50 | length 30 |" in second
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert rows[0]["window_mean_return"] is None and rows[1]["window_mean_return"] == 12.5


def test_an_evaluation_shows_the_best_so_far_and_the_next_goal_across_a_resume_in_place(tmp_path, capsys):
    """What a CPU user sees while waiting (issue 89): after each evaluation, the best evaluation so far and the task's
    next solve threshold not yet reached; a run resumed in the same folder remembers its best."""
    def evaluated(iteration, value):
        return dict(row(iteration, 1.0, 10.0, 1), eval={"return_mean": value})

    logger = RunLogger(str(tmp_path), "Toy", max_iterations=4, thresholds=(3000, 6000)).begin()
    logger.log(evaluated(0, 2500.0))
    logger.log(evaluated(1, 3100.0))
    logger.log(evaluated(2, 2900.0))
    logger.close()
    lines = capsys.readouterr().out.splitlines()[-3:]
    # evaluations at 32, 64, 96 env steps (row()): one point has no pace; 2500 -> 3100 in 32 steps reaches 6000
    # 154.7 steps later; through 2500, 3100, 2900 the least-squares line rises 6.25 a step from 2833 at 64: it
    # reaches 6000 at 570.7, 474.7 steps after the last evaluation
    assert lines[0].endswith("| eval return 2500.00 (best 2500.00, next goal 3000)")
    assert lines[1].endswith("| eval return 3100.00 (best 3100.00, next goal 6000 in ~155 env steps at the recent "
                             "pace)")
    assert lines[2].endswith("| eval return 2900.00 (best 3100.00, next goal 6000 in ~475 env steps at the recent "
                             "pace)")
    resumed = RunLogger(str(tmp_path), "Toy", max_iterations=4, thresholds=(3000, 6000)).begin(start_iteration=2)
    resumed.log(evaluated(2, 6100.0))  # (iteration 2's row redone: the best before it is 3100)
    resumed.close()
    assert capsys.readouterr().out.splitlines()[-1].endswith("(best 6100.00, every goal reached)")
    assert RunLogger(str(tmp_path / "none"), "Toy", 1).begin()._standing(5.0) == "best 5.00"


def test_the_steps_to_the_next_goal_are_said_only_for_a_rising_pace():
    from isaac_ppo.io.logger import _steps, _steps_to

    assert _steps_to(3000.0, [(1_000_000, 1000.0), (2_000_000, 2000.0)]) == 1_000_000
    assert _steps_to(3000.0, [(1_000_000, 2000.0), (2_000_000, 1000.0)]) is None  # falling: no pace to extrapolate
    assert _steps_to(3000.0, [(1_000_000, 2000.0), (2_000_000, 2000.0)]) is None  # flat
    assert _steps_to(3000.0, [(1_000_000, 2000.0)]) is None  # one point
    assert _steps_to(1500.0, [(1_000_000, 1000.0), (2_000_000, 2000.0)]) is None  # the line passed it: a dip, not a pace
    assert [_steps(n) for n in (1_234_567, 350_400, 900)] == ["1.2M", "350k", "900"]
