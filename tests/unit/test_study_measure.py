"""A study that aims at a task's measure of success instead of its return (`measure:`, e.g. FrankaCabinet's
drawer_opened): its definition checked against the task, and every number of its report (the clock's time to each
threshold and the values at the marks, the comparisons on final and AUC, the second reading) read off that measure,
on synthetic run folders whose return and measure disagree, so that reading the wrong one fails."""
from __future__ import annotations

import json

import pytest

from isaac_ppo.errors import UserError
from isaac_ppo.lab.report import clock, compare, retest
from isaac_ppo.lab.study_definition import load_study

ARMS = "arms:\n  a: []\n  b: [num_envs=32]\nseeds: [0, 1]\n"


def study_file(tmp_path, body: str, arms: str = ARMS, common: str = "common: [task=FrankaCabinet]\n") -> str:
    path = tmp_path / "s.yaml"
    path.write_text(common + arms + body)
    return str(path)


def test_a_measure_the_task_declares_loads_with_its_stop_rule(tmp_path):
    study = load_study(study_file(tmp_path, "measure: drawer_opened\nstop: {minutes: 3, at_measure: 0.9}\n"))
    assert study["measure"] == "drawer_opened" and study["stop"] == {"minutes": 3, "at_measure": 0.9}
    assert load_study(study_file(tmp_path, ""))["measure"] == "return_mean"  # (the default: every older study's)


@pytest.mark.parametrize("body, arms, fragment", [
    ("measure: foo\n", ARMS, "measure=foo: arm a's task FrankaCabinet is solved by return_mean, drawer_opened"),
    ("measure: drawer_opened\n", "arms:\n  a: []\n  b: [task=Ant]\nseeds: [0]\n",
     "measure=drawer_opened: arm b's task Ant is solved by return_mean"),
    ("measure: [drawer_opened]\n", ARMS, "measure names an evaluation key"),
    ("measure: drawer_opened\nstop: {at_return: 3000}\n", ARMS, "stop.at_return stops at a return; this study's "
                                                                  "measure is drawer_opened: use stop.at_measure"),
    ("stop: {at_measure: high}\n", ARMS, "stop.at_return and stop.at_measure take a number"),
    ("stop: {at_drawer: 1}\n", ARMS, "stop takes minutes (more than 0), at_return and at_measure only, not at_drawer"),
])
def test_a_measure_or_stop_rule_the_study_cannot_keep_is_one_line(tmp_path, body, arms, fragment):
    with pytest.raises(UserError) as caught:
        load_study(study_file(tmp_path, body, arms))
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_an_arm_without_task_is_checked_as_config_yaml_s_default_task(tmp_path):
    with pytest.raises(UserError, match="measure=drawer_opened: arm a's task Ant is solved by return_mean$"):
        load_study(study_file(tmp_path, "measure: drawer_opened\n", common="common: []\n"))


def run_folder(tmp_path, arm, seed, opened, returns, final_opened, final_return):
    """A FrankaCabinet run: evaluations at 1000, 2000, 3000 env steps (10 s of clock apart) whose drawer_opened and
    return_mean are given, its final evaluation (the same policy as the last periodic one: a second reading), and a
    config.yaml whose task declares drawer_opened's thresholds."""
    folder = tmp_path / arm / f"seed_{seed}"
    folder.mkdir(parents=True)
    rows = [{"iteration": i, "env_steps": 1000 * i, "wall_s": 10.0 * i,
             "eval": {"return_mean": r, "drawer_opened": o, "env_steps": 1000 * i, "seconds": 0.0, "policy_version": i}}
            for i, (o, r) in enumerate(zip(opened, returns), start=1)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "metrics.json").write_text(json.dumps({"final_eval": {"return_mean": final_return,
                                                                    "drawer_opened": final_opened,
                                                                    "policy_version": len(rows)}}))
    (folder / "config.yaml").write_text("task:\n  name: FrankaCabinet\n  solve_thresholds: []\n"
                                        "  solve_measures:\n    drawer_opened: [0.5, 0.9]\n")
    return str(folder)


def disagreeing_runs(tmp_path):
    """Arm a opens the drawer (past 0.5 at its second evaluation, 0.9 at its third) for a lower return; arm b earns
    more and never opens it past 0.2."""
    runs = {"a": [], "b": []}
    for seed in range(3):
        runs["a"].append(run_folder(tmp_path, "a", seed, [0.1, 0.6, 0.95], [1000, 1500, 2000], 0.9 + 0.01 * seed,
                                    2000 + seed))
        runs["b"].append(run_folder(tmp_path, "b", seed, [0.0, 0.1, 0.2], [2000, 3000, 3500], 0.1 + 0.01 * seed,
                                    3500 + seed))
    return runs


def study_of(measure):
    return {"name": "s", "source": "s.yaml", "thresholds": None, "marks_min": [0.4], "arms": {"a": [], "b": []},
            "common": [], "seeds": [0, 1, 2], "measure": measure, "stop": {},
            "compare": [{"claim": "1", "a": "a", "b": "b", "metric": "final", "expect": "greater"},
                        {"claim": "1 (AUC)", "a": "a", "b": "b", "metric": "auc", "expect": "greater"}],
            "predict": None, "claims": {}}


def test_the_clock_reads_the_study_s_measure_and_the_task_s_thresholds_for_it(tmp_path):
    runs, out = disagreeing_runs(tmp_path), tmp_path / "report"
    clock.write(runs, study_of("drawer_opened"), str(out), copies=False)
    summary = json.loads((out / "study.json").read_text())
    assert summary["measure"] == "drawer_opened" and summary["thresholds"] == [0.5, 0.9]
    a, b = summary["arms"]["a"], summary["arms"]["b"]
    assert a["to_0.5_s"] == [20.0] * 3 and a["to_0.9_s"] == [30.0] * 3 and a["to_0.5_env_steps"] == [2000] * 3
    assert b["to_0.5_reached"] == "0/3" and b["to_0.5_median_s"] is None
    assert a["eval_at_0.4min"] == [0.6] * 3 and b["eval_at_0.4min"] == [0.1] * 3  # (the value at 24 s: the second)
    text = (out / "study.md").read_text()
    assert "to drawer_opened 0.9: reached" in text and "eval drawer_opened at 0.4 min (median)" in text
    assert (out / "eval_vs_env_steps.png").read_bytes()[:4] == b"\x89PNG"


def test_the_clock_of_a_return_study_is_unchanged(tmp_path):
    """The same runs under the default measure: the return's thresholds (none declared here) and values."""
    runs, out = disagreeing_runs(tmp_path), tmp_path / "report"
    study = dict(study_of("return_mean"), thresholds=[3000])
    clock.write(runs, study, str(out), copies=False)
    summary = json.loads((out / "study.json").read_text())
    assert summary["arms"]["b"]["to_3000_s"] == [20.0] * 3 and summary["arms"]["a"]["to_3000_reached"] == "0/3"
    assert summary["arms"]["b"]["eval_at_0.4min"] == [3000.0] * 3
    assert "to 3000: reached" in (out / "study.md").read_text()


def test_the_comparisons_and_the_second_reading_read_the_measure(tmp_path):
    runs, out = disagreeing_runs(tmp_path), tmp_path / "report"
    out.mkdir()
    compare.write(runs, study_of("drawer_opened"), str(out))
    compared = json.loads((out / "compare.json").read_text())
    assert compared["measure"] == "drawer_opened"
    final, auc = compared["comparisons"]
    assert final["mean_a"] == pytest.approx(0.91) and final["mean_b"] == pytest.approx(0.11)
    assert final["verdict"] == "supported"  # (a opens the drawer; on the return it is behind)
    assert auc["mean_a"] == pytest.approx((0.1 + 0.6 + 0.95) / 3) and auc["matched_points"] == 3
    assert auc["verdict"] == "supported"
    on_return = compare.compare(runs, study_of("return_mean")["compare"][0])
    assert on_return["verdict"] == "contradicted" and on_return["mean_a"] == pytest.approx(2001)
    assert retest.write(runs, study_of("drawer_opened"), str(out))
    again = json.loads((out / "retest.json").read_text())
    second = again["comparisons"][0]["second"]  # (the last periodic evaluations: 0.95 against 0.2)
    assert second["mean_a"] == pytest.approx(0.95) and second["mean_b"] == pytest.approx(0.2)
    assert again["runs"] == 6 and again["mean_abs_difference"] == pytest.approx(
        sum(abs(0.95 - (0.9 + 0.01 * s)) + abs(0.2 - (0.1 + 0.01 * s)) for s in range(3)) / 6)
