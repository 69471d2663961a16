"""isaac-ppo-bench peers compares the two agents on each run's evaluation at the same env steps (with its CI),
not on the lagged training window."""
from __future__ import annotations

import pytest

from isaac_ppo.lab.bench import compare_evaluations, evaluation_at, window_return_at


def _evaluation(env_steps, mean, iqm=None, ci=(0.0, 1.0), episodes=64):
    return {"env_steps": env_steps, "return_mean": mean, "return_iqm": mean if iqm is None else iqm,
            "return_ci95": list(ci), "episodes": episodes}


def _run(evaluations, final):
    rows = [{"iteration": i, "env_steps": 1000 * (i + 1), "window_mean_return": float(i)} for i in range(6)]
    for evaluation in evaluations:
        rows[evaluation["env_steps"] // 1000 - 1]["eval"] = evaluation
    return {"rows": rows, "summary": {"final_eval": final}}


def test_the_evaluation_at_matched_env_steps_is_the_last_one_not_after_them():
    run = _run([_evaluation(2000, 10.0), _evaluation(4000, 20.0)], final=_evaluation(6000, 30.0))
    assert evaluation_at(run, 6000)["return_mean"] == 30.0  # the final evaluation, when the run ended there
    assert evaluation_at(run, 5000)["return_mean"] == 20.0
    assert evaluation_at(run, 3999)["return_mean"] == 10.0
    assert evaluation_at(run, 1000) is None
    assert evaluation_at(_run([], final=None), 6000) is None  # a run that never evaluated
    assert window_return_at(run["rows"], 3500) == 2.0  # the lagged training window, shown beside it


def test_several_seeds_give_the_iqm_and_a_bootstrap_ci_over_seeds_one_seed_its_episodes():
    seeds = [_evaluation(6000, value) for value in (10.0, 20.0, 30.0, 40.0)]
    compared = compare_evaluations(seeds)
    assert compared["eval_return_iqm"] == pytest.approx(25.0)  # the middle two of four
    low, high = compared["eval_ci95"]
    assert 10.0 <= low <= 25.0 <= high <= 40.0
    assert compared["eval_ci_over"] == "4 seeds" and compared["eval_env_steps"] == [6000]
    one = compare_evaluations([_evaluation(6000, 12.0, iqm=11.0, ci=(9.0, 13.0), episodes=64)])
    assert one == {"eval_return_iqm": 11.0, "eval_ci95": [9.0, 13.0], "eval_env_steps": [6000],
                   "eval_ci_over": "64 episodes"}
    assert compare_evaluations([])["eval_return_iqm"] is None
