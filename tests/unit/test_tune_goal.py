"""What isaac-ppo-tune aims at: a return threshold, or a threshold of a task's measure of success (its
solve_measures: FrankaCabinet's drawer_opened); the defaults from the task's config, a measure the task is not solved
by refused in one line, and the watch that stops a trial reading that measure off the evaluation rows."""
from __future__ import annotations

import json

import pytest

from isaac_ppo.errors import UserError
from isaac_ppo.lab.tune import load_space
from isaac_ppo.lab.watch import Progress

SEARCH = "search:\n  agent.learning_rate: {float: [1.0e-4, 1.0e-3], log: true}\n"


def space_file(tmp_path, body: str) -> str:
    path = tmp_path / "space.yaml"
    path.write_text(body + SEARCH)
    return str(path)


@pytest.mark.parametrize("body, goal", [
    ("task: Cartpole\n", ("return_mean", 475.0)),  # (the task's first solve_thresholds)
    ("task: FrankaCabinet\n", ("drawer_opened", 0.5)),  # no return threshold: its first solve_measures'
    ("task: FrankaCabinet\nthreshold: 2000\n", ("return_mean", 2000.0)),  # a threshold given alone is a return
    ("task: FrankaCabinet\nmeasure: drawer_opened\nthreshold: 0.9\n", ("drawer_opened", 0.9)),
    ("task: ShadowHand\nmeasure: successes\n", ("successes", 1.0)),
])
def test_the_goal_is_the_tasks_unless_given(tmp_path, body, goal):
    space = load_space(space_file(tmp_path, body))
    assert (space["measure"], space["threshold"]) == goal


@pytest.mark.parametrize("body, message", [
    ("task: FrankaCabinet\nmeasure: successes\n",
     "measure='successes': the task FrankaCabinet is solved by return_mean, drawer_opened"),
    ("task: FrankaCabinet\nmeasure: return_mean\n", "threshold: the task FrankaCabinet lists no solve_thresholds"),
    ("task: Cartpole\nmeasure: drawer_opened\n", "measure='drawer_opened': the task Cartpole is solved by return_mean"),
])
def test_a_goal_the_task_has_no_threshold_for_is_one_line(tmp_path, body, message):
    with pytest.raises(UserError) as caught:
        load_space(space_file(tmp_path, body))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_watch_reads_the_measure_it_is_given_off_the_evaluations(tmp_path):
    rows = [{"wall_s": 10.0, "eval": {"return_mean": 3000.0, "drawer_opened": 0.4, "wall_s": 11.0, "seconds": 1.0,
                                      "env_steps": 100}},
            {"wall_s": 20.0, "eval": {"return_mean": 400.0, "drawer_opened": 0.95, "wall_s": 22.0, "seconds": 1.0,
                                      "env_steps": 200}}]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    opened, returned = Progress(0.9, "drawer_opened"), Progress(2000.0)
    opened.read(str(path))
    returned.read(str(path))
    assert (opened.solved, opened.best) == ((22.0, 200), 0.95)  # (its return fell as the drawer opened)
    assert (returned.solved, returned.best) == ((11.0, 100), 3000.0)


def test_a_trial_aimed_at_a_measure_is_solved_when_it_is_and_takes_the_runs_own_record(tmp_path):
    """A stand-in for isaac-ppo-train writes an evaluation whose drawer_opened passes 0.9 while its return falls,
    then its metrics.json: the trial is solved, at the seconds measure_solve_times recorded."""
    import sys

    from isaac_ppo.lab.tune import run_trial

    class Trial:
        number = 0

        def report(self, value, step):
            pass

        def should_prune(self):
            return False

        def set_user_attr(self, key, value):
            pass

    folder = tmp_path / "trials" / "trial_0" / "run"
    folder.mkdir(parents=True)
    row = {"wall_s": 20.0, "env_steps": 200, "eval": {"return_mean": 400.0, "drawer_opened": 0.95, "wall_s": 22.0,
                                                      "seconds": 1.0, "env_steps": 200}}
    summary = {"solve_times": [{"threshold": 0.9, "seconds": 1.0, "env_steps": 1}],  # (a return's: not this goal)
               "measure_solve_times": [{"measure": "drawer_opened", "threshold": 0.9, "seconds": 21.5,
                                        "env_steps": 200}]}
    writer = (f"import json\nopen({str(folder / 'metrics.jsonl')!r}, 'w').write(json.dumps({row!r}) + '\\n')\n"
              f"open({str(folder / 'metrics.json')!r}, 'w').write(json.dumps({summary!r}))\n")
    space = {"threshold": 0.9, "measure": "drawer_opened", "report_every_s": 100.0}
    result = run_trial(Trial(), [sys.executable, "-c", writer], str(tmp_path / "trials"), space, cap_s=120.0)
    assert (result["solved_s"], result["solved_env_steps"], result["best_eval"]) == (21.5, 200, 0.95)
    assert result["value"] == 21.5


@pytest.mark.parametrize("start, message", [
    ("start: {agent.learning_rate: 5.0e-4}\n", "start must be a list of {KEY: VALUE} settings"),
    ("start: [{agent.learning_rate: 5.0e-4, num_envs: 64}]\n", "start[0] must name every searched key and no "
                                                               "other (not searched num_envs)"),
    ("start: [{agent.learning_rate: 0.01}]\n", "start[0].agent.learning_rate: 0.01 is outside search"),
    ("start: [{agent.learning_rate: fast}]\n", "start[0].agent.learning_rate: 'fast' is outside search"),
])
def test_a_start_point_the_search_cannot_reach_is_one_line(tmp_path, start, message):
    with pytest.raises(UserError) as caught:
        load_space(space_file(tmp_path, "task: Cartpole\n" + start))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_start_point_inside_the_search_is_kept_as_given(tmp_path):
    space = load_space(space_file(tmp_path, "task: Cartpole\nstart: [{agent.learning_rate: 5.0e-4}]\n"))
    assert space["start"] == [{"agent.learning_rate": 5.0e-4}]
