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
