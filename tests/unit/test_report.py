"""isaac-ppo-report on synthetic run folders: the statistics against hand-computed answers, grouping and run
status, the files written, and the one-line errors."""
from __future__ import annotations

import csv
import json
import os
import re
from typing import Dict, List, Optional, Sequence

import numpy as np
import pytest

from isaac_ppo.errors import UserError
from isaac_ppo.lab.report import main
from isaac_ppo.lab.report.figures import common_grid
from isaac_ppo.lab.report.groups import gather
from isaac_ppo.lab.report.runs import parse_overrides
from isaac_ppo.stats import iqm, stratified_bootstrap_ci, stratified_resample_indices

STEPS = 1000  # env steps per synthetic iteration


def make_run(folder: str, overrides: Sequence[str], returns: Sequence[Optional[float]], task: str = "Cartpole",
             seed: int = 0, ending: Optional[str] = "complete", diagnostics_every: int = 0,
             wall_per_iteration: float = 2.0) -> str:
    """A run folder as isaac-ppo-train writes it. ending: 'complete', a signal name ('SIGTERM') for a stopped
    run, or None for one without metrics.json (crashed or still running)."""
    os.makedirs(os.path.join(folder, ".hydra"), exist_ok=True)
    with open(os.path.join(folder, ".hydra", "overrides.yaml"), "w") as f:
        f.writelines(f"- {item}\n" for item in overrides)
    with open(os.path.join(folder, "config.yaml"), "w") as f:
        f.write(f"task:\n  name: {task}\nseed: {seed}\n")
    rows = []
    for i, value in enumerate(returns):
        row: Dict[str, object] = {"iteration": i, "env_steps": (i + 1) * STEPS, "wall_s": (i + 1) * wall_per_iteration,
                                  "window_mean_return": value, "num_envs": 128, "fps": 500.0, "mode": "sync"}
        if diagnostics_every and i % diagnostics_every == 0:
            row["diagnostics"] = {"feature_rank": 10.0 + seed + i, "dormant_fraction": 0.01 * i}
        rows.append(row)
    with open(os.path.join(folder, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    if ending is not None:
        summary = {"task": task, "iterations": len(rows), "env_steps": len(rows) * STEPS,
                   "wall_s": len(rows) * wall_per_iteration, "final_window_mean_return": returns[-1] if returns else None,
                   "mean_fps": 500.0, "last_checkpoint": "",
                   "stopped_by": None if ending == "complete" else ending}
        with open(os.path.join(folder, "metrics.json"), "w") as f:
            json.dump(summary, f)
    return folder


def curve(final: float, length: int = 6) -> List[Optional[float]]:
    """A learning curve ending at `final`, null for the first iteration (no episode finished yet)."""
    return [None] + [final * (i + 1) / (length - 1) for i in range(length - 1)]


def overrides(num_envs: int, seed: int) -> List[str]:
    return ["task=Cartpole", "sim=mujoco", f"seed={seed}", "scheduler=budget", f"scheduler.num_envs={num_envs}"]


@pytest.fixture
def sweep(tmp_path):
    """A multirun: num_envs 1024 x seeds 0-3 (all complete), num_envs 128 x seeds 0-3 (two complete, one
    stopped by SIGTERM, one without metrics.json), with diagnostics every other iteration."""
    root = tmp_path / "multirun"
    finals = {1024: [1.0, 2.0, 3.0, 100.0], 128: [10.0, 20.0, 30.0, 40.0]}
    endings = {1024: ["complete"] * 4, 128: ["complete", "complete", "SIGTERM", None]}
    job = 0
    for num_envs in (1024, 128):
        for seed in range(4):
            make_run(str(root / str(job)), overrides(num_envs, seed), curve(finals[num_envs][seed]), seed=seed,
                     ending=endings[num_envs][seed], diagnostics_every=2)
            job += 1
    (root / "multirun.yaml").write_text("hydra: {}\n")
    return root


def run_main(argv: Sequence[str], capsys) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def read_csv(path) -> List[Dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


# ------------------------------------------------------------------------------------------ IQM


@pytest.mark.parametrize("values, expected", [
    ([1.0, 2.0, 10.0], 13.0 / 3.0),  # n=3: int(0.75) = 0 cut, the plain mean
    ([100.0, 1.0, 3.0, 2.0], 2.5),  # n=4: the middle two
    ([5.0, 1.0, 4.0, 2.0, 100.0], 11.0 / 3.0),  # n=5: the middle three of 1 2 4 5 100
    ([1000.0, 1.0, 6.0, 2.0, -100.0, 3.0, 5.0, 4.0], 3.5),  # n=8: two cut from each end -> 2 3 4 5
])
def test_iqm_known_values(values, expected):
    assert iqm(values) == pytest.approx(expected)


def test_iqm_matches_sorted_trim_reference():
    rng = np.random.default_rng(3)
    for n in range(1, 30):
        x = rng.standard_cauchy(n)
        cut = n // 4
        reference = sum(sorted(x)[cut:n - cut]) / (n - 2 * cut)
        assert iqm(x) == pytest.approx(reference)


def test_iqm_vectorised_over_points():
    x = np.random.default_rng(0).normal(size=(7, 5))
    np.testing.assert_allclose(iqm(x), [iqm(x[:, j]) for j in range(5)])


# ------------------------------------------------------------------------------------------ bootstrap


def test_bootstrap_ci_contains_iqm_and_is_deterministic():
    x = np.random.default_rng(1).normal(10.0, 2.0, size=12)
    low, high = stratified_bootstrap_ci(x, ["a"] * 12, reps=2000, seed=0)
    assert low < iqm(x) < high
    assert (low, high) == stratified_bootstrap_ci(x, ["a"] * 12, reps=2000, seed=0)
    assert (low, high) != stratified_bootstrap_ci(x, ["a"] * 12, reps=2000, seed=1)


def test_bootstrap_ci_degenerate_for_identical_values_and_one_run():
    assert stratified_bootstrap_ci([4.5] * 6, ["a"] * 6, reps=500, seed=0) == (4.5, 4.5)
    assert stratified_bootstrap_ci([7.0], ["a"], reps=500, seed=0) == (7.0, 7.0)


def test_bootstrap_ci_narrows_with_more_runs():
    rng = np.random.default_rng(2)
    few, many = rng.normal(size=5), rng.normal(size=200)
    few_low, few_high = stratified_bootstrap_ci(few, ["a"] * 5, reps=2000, seed=0)
    many_low, many_high = stratified_bootstrap_ci(many, ["a"] * 200, reps=2000, seed=0)
    assert many_high - many_low < 0.5 * (few_high - few_low)


def test_bootstrap_ci_vectorised_matches_each_point():
    x = np.random.default_rng(4).normal(size=(9, 4))
    strata = ["a"] * 5 + ["b"] * 4
    low, high = stratified_bootstrap_ci(x, strata, reps=300, seed=5)
    for j in range(4):
        assert (low[j], high[j]) == pytest.approx(stratified_bootstrap_ci(x[:, j], strata, reps=300, seed=5))


def test_stratified_resampling_keeps_each_stratum_count():
    strata = ["Ant"] * 3 + ["Humanoid"] * 5 + ["Cartpole"] * 2
    indices = stratified_resample_indices(strata, reps=400, rng=np.random.default_rng(0))
    assert indices.shape == (400, 10)
    labels = np.asarray(strata)[indices]
    for task, count in (("Ant", 3), ("Humanoid", 5), ("Cartpole", 2)):
        assert ((labels == task).sum(axis=1) == count).all()


def test_stratified_ci_of_two_far_apart_strata():
    # every stratified resample holds four 0s and four 100s, whose IQM is 50: a pooled (unstratified)
    # resample would draw uneven mixes and spread the interval
    values = [0.0] * 4 + [100.0] * 4
    assert stratified_bootstrap_ci(values, ["A"] * 4 + ["B"] * 4, reps=1000, seed=0) == (50.0, 50.0)
    low, high = stratified_bootstrap_ci(values, ["A"] * 8, reps=1000, seed=0)
    assert low < 50.0 < high


# ------------------------------------------------------------------------------------------ gathering


def test_parse_overrides_strips_prefixes():
    parsed = parse_overrides(["task=Ant", "+max_env_steps=100", "++seed=3", "~agent.network", "a.b=x=y"])
    assert parsed == {"task": "Ant", "max_env_steps": "100", "seed": "3", "agent.network": "~", "a.b": "x=y"}


def test_groups_by_swept_key_with_seeds_pooled(sweep):
    report = gather([str(sweep)], reps=500)
    assert report.swept == ["scheduler.num_envs"]
    assert report.common == {"task": "Cartpole", "sim": "mujoco", "scheduler": "budget"}
    assert [g.values["scheduler.num_envs"] for g in report.groups] == ["128", "1024"]  # numerically
    small, large = report.groups
    assert len(large.runs) == 4 and len(large.used) == 4
    assert large.iqm == pytest.approx(2.5)  # the middle two of 1 2 3 100
    assert small.iqm == pytest.approx(15.0)  # 10 and 20: the stopped and the unfinished run stay out
    assert small.ci == (10.0, 20.0)  # resampled means of two runs: 10, 15 or 20
    assert large.env_steps == 6 * STEPS and large.wall_s == pytest.approx(12.0)
    left_out = {os.path.basename(run.path): why for run, why in report.left_out}
    assert set(left_out) == {"6", "7"}
    assert left_out["6"].startswith("stopped by SIGTERM at iteration 6")
    assert left_out["7"].startswith("crashed or running")


def test_last_non_null_value_is_the_final(tmp_path):
    for seed, values in enumerate([[1.0, 5.0, None], [2.0, 7.0], [3.0, 9.0, None, None]]):
        make_run(str(tmp_path / str(seed)), ["task=Cartpole", f"seed={seed}"], values, seed=seed)
    report = gather([str(tmp_path)], reps=100)
    assert [g.finals for g in report.groups] == [[5.0, 7.0, 9.0]]
    assert report.groups[0].iqm == pytest.approx(7.0)


def test_console_table_and_files(sweep, capsys):
    out = run_main([str(sweep), "--reps", "300"], capsys)
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("scheduler.num_envs"))
    assert "runs" in header and "IQM window_mean_return" in header and "95% CI" in header and "wall" in header
    cells = {line.split()[0]: re.split(r"\s{2,}", line) for line in lines if line.startswith(("128 ", "1024 "))}
    assert cells["128"] == ["128", "2/4", "15", "[10, 20]", "6.0k", "0:00:12"]
    assert cells["1024"][1:3] == ["4/4", "2.5"] and cells["1024"][4:] == ["6.0k", "0:00:12"]
    assert "common settings: task=Cartpole sim=mujoco scheduler=budget" in out
    assert "stopped by SIGTERM at iteration 6" in out and "crashed or running" in out
    assert os.path.join(str(sweep), "6") in out and os.path.join(str(sweep), "7") in out

    report_dir = sweep / "report"
    for name in ("report.md", "report.csv", "runs.csv", "curve_window_mean_return.png",
                 "final_vs_scheduler.num_envs.png", "diagnostics.png"):
        assert (report_dir / name).stat().st_size > 0, name
        assert str(report_dir / name) in out
    groups = read_csv(report_dir / "report.csv")
    assert [g["scheduler.num_envs"] for g in groups] == ["128", "1024"]
    assert float(groups[1]["iqm"]) == pytest.approx(2.5)
    assert (groups[0]["runs_complete"], groups[0]["runs_total"]) == ("2", "4")
    runs = read_csv(report_dir / "runs.csv")
    assert len(runs) == 8
    stopped = next(r for r in runs if r["folder"].endswith(os.sep + "6"))
    assert stopped["status"].startswith("stopped") and stopped["group"] == "scheduler.num_envs=128"
    assert stopped["seed"] == "2" and float(stopped["final_window_mean_return"]) == pytest.approx(30.0)
    markdown = (report_dir / "report.md").read_text()
    assert "| 128 | 2/4 | 15 |" in markdown and "window_mean_return" in markdown and "`scheduler=budget`" in markdown
    assert "stopped by SIGTERM" in markdown

    # a second report over the same folder does not mistake the first one's folder for runs
    out_again = run_main([str(sweep), "--reps", "300"], capsys)
    assert out_again.splitlines()[:8] == lines[:8]


def test_metric_from_diagnostics(sweep, capsys, tmp_path):
    out_dir = tmp_path / "diag_report"
    out = run_main([str(sweep), "--metric", "diagnostics.feature_rank", "--out", str(out_dir), "--reps", "200"],
                   capsys)
    assert "IQM diagnostics.feature_rank" in out
    groups = read_csv(out_dir / "report.csv")
    # measured at iterations 0, 2, 4: the last is 10 + seed + 4, seeds 0-3 -> IQM of 14 15 16 17 = 15.5
    assert float(groups[1]["iqm"]) == pytest.approx(15.5)
    assert float(groups[0]["iqm"]) == pytest.approx(14.5)  # seeds 0 and 1
    assert (out_dir / "curve_diagnostics.feature_rank.png").exists()


def test_common_grid_truncates_to_shortest_and_skips_nulls():
    a = (np.array([2000.0, 3000.0, 4000.0, 5000.0]), np.array([2.0, 3.0, 4.0, 5.0]))
    b = (np.array([1000.0, 2000.0, 3000.0]), np.array([10.0, 20.0, 30.0]))
    grid, values = common_grid([a, b])
    np.testing.assert_array_equal(grid, [2000.0, 3000.0])
    np.testing.assert_array_equal(values, [[2.0, 3.0], [20.0, 30.0]])
    long = (np.arange(1, 1001) * 10.0, np.arange(1000.0))
    grid, values = common_grid([long, long], max_points=200)
    assert len(grid) <= 200 and grid[0] == 10.0 and grid[-1] == 10000.0


def test_single_run_nothing_swept(tmp_path, capsys):
    make_run(str(tmp_path / "run"), ["task=Cartpole"], curve(3.0))
    out = run_main([str(tmp_path / "run"), "--out", str(tmp_path / "out"), "--reps", "50"], capsys)
    assert "1/1" in out and "n=1" in out and "skipped" in out
    assert (tmp_path / "out" / "curve_window_mean_return.png").exists()
    assert not list((tmp_path / "out").glob("final_vs_*.png"))


def test_no_diagnostics_skips_panel(tmp_path, capsys):
    for seed in range(2):
        make_run(str(tmp_path / str(seed)), ["task=Cartpole", f"seed={seed}", f"lr={seed}"], curve(1.0 + seed),
                 seed=seed)
    out = run_main([str(tmp_path), "--reps", "50"], capsys)
    assert "diagnostics.png skipped" in out
    assert not (tmp_path / "report" / "diagnostics.png").exists()
    assert (tmp_path / "report" / "final_vs_lr.png").exists()


def test_two_swept_keys_categorical_first_and_a_group_without_complete_runs(tmp_path, capsys):
    job = 0
    for schedule in ("linear", "adaptive"):
        for num_envs in (64, 256):
            for seed in range(2):
                ending = "SIGTERM" if (schedule, num_envs) == ("linear", 256) else "complete"
                make_run(str(tmp_path / str(job)), [f"agent.lr_schedule={schedule}", f"num_envs={num_envs}",
                                                     f"seed={seed}"], curve(num_envs + seed), seed=seed,
                         ending=ending)
                job += 1
    out = run_main([str(tmp_path), "--reps", "100"], capsys)
    rows = [re.split(r"\s{2,}", line) for line in out.splitlines() if line.startswith(("linear", "adaptive"))]
    assert [r[:3] for r in rows] == [["adaptive", "64", "2/2"], ["adaptive", "256", "2/2"],
                                     ["linear", "64", "2/2"], ["linear", "256", "0/2"]]
    assert rows[-1][3:] == ["-"] * 4 and rows[1][3] == "256.5"
    assert (tmp_path / "report" / "final_vs_agent.lr_schedule.png").stat().st_size > 0


# ------------------------------------------------------------------------------------------ errors


def assert_one_line_error(argv: Sequence[str], capsys, *fragments: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith("isaac-ppo-report: ")
    assert "Traceback" not in captured.err
    for fragment in fragments:
        assert fragment in captured.err
    return captured.err


def test_error_nonexistent_folder(tmp_path, capsys):
    assert_one_line_error([str(tmp_path / "nope")], capsys, "nope", "no such directory")


def test_error_folder_without_runs(tmp_path, capsys):
    assert_one_line_error([str(tmp_path)], capsys, "no runs found", ".hydra/overrides.yaml")


def test_error_mismatched_keys(tmp_path, capsys):
    make_run(str(tmp_path / "0"), ["task=Cartpole", "seed=0"], [1.0])
    make_run(str(tmp_path / "1"), ["task=Cartpole", "seed=1", "+max_env_steps=5000"], [1.0])
    assert_one_line_error([str(tmp_path)], capsys, "mismatched keys", "`max_env_steps`",
                          str(tmp_path / "0"), str(tmp_path / "1"), "separately")


def test_error_metric_not_logged(sweep, capsys):
    err = assert_one_line_error([str(sweep), "--metric", "no_such_key"], capsys, "--metric no_such_key",
                                "choose one of", "window_mean_return", "diagnostics.feature_rank")
    assert "mode" not in err.split("choose one of")[1].split(", ")  # a string field is no metric


def test_error_no_complete_run(tmp_path, capsys):
    make_run(str(tmp_path / "0"), ["task=Cartpole", "seed=0"], [1.0, 2.0], ending="SIGINT")
    make_run(str(tmp_path / "1"), ["task=Cartpole", "seed=1"], [1.0], ending=None)
    make_run(str(tmp_path / "2"), ["task=Cartpole", "seed=2"], [], ending=None)
    assert_one_line_error([str(tmp_path)], capsys, "no complete run", "3 runs", "1 stopped",
                          "1 crashed or running", "1 empty")


def test_gather_raises_user_error_directly(tmp_path):
    with pytest.raises(UserError):
        gather([str(tmp_path)])


def test_a_key_left_at_its_default_takes_the_value_the_run_used(tmp_path, capsys):
    """An isaac-ppo run beside an rl-games one: only the latter overrides agent.backend; the former's value comes
    from its resolved config (and a group choice from Hydra's runtime choices)."""
    for seed in (0, 1):
        ours = make_run(str(tmp_path / f"ours{seed}"), ["task=Cartpole", f"seed={seed}"], [10.0 + seed], seed=seed)
        with open(os.path.join(ours, "config.yaml"), "a") as f:
            f.write("agent:\n  backend: isaac_ppo\n")
        with open(os.path.join(ours, ".hydra", "hydra.yaml"), "w") as f:
            f.write("hydra:\n  runtime:\n    choices:\n      scheduler: fixed\n")
        make_run(str(tmp_path / f"peer{seed}"), ["task=Cartpole", f"seed={seed}", "agent.backend=rl_games",
                                                  "scheduler=fixed"], [20.0 + seed], seed=seed)
    assert main([str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    with open(tmp_path / "out" / "report.csv") as f:
        groups = {row["agent.backend"]: row for row in csv.DictReader(f)}
    assert sorted(groups) == ["isaac_ppo", "rl_games"]
    assert float(groups["isaac_ppo"]["iqm"]) == 10.5 and float(groups["rl_games"]["iqm"]) == 20.5
    assert "scheduler=fixed" in capsys.readouterr().out  # the same choice either way: a common setting


def test_run_names_and_output_folders_are_not_group_keys(tmp_path):
    """isaac-ppo-bench peers names each run peers_<agent>_s<seed>, and runs gathered from two sessions sit under
    two runs_dirs: neither says how a run trains, so the seeds of one agent still pool into one group."""
    for seed in (0, 1, 2):
        for backend, final in (("isaac_ppo", 10.0), ("rl_games", 20.0)):
            session = "a" if seed == 0 else "b"
            make_run(str(tmp_path / session / f"peers_{backend}_s{seed}"),
                     ["task=Ant", f"seed={seed}", f"agent.backend={backend}", f"runs_dir=/runs/{session}",
                      f"experiment=peers_{backend}_s{seed}", "diagnostics=off"], [final + seed], seed=seed)
    assert main([str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    with open(tmp_path / "out" / "report.csv") as f:
        groups = {row["agent.backend"]: row for row in csv.DictReader(f)}
    assert sorted(groups) == ["isaac_ppo", "rl_games"]
    assert "experiment" not in groups["isaac_ppo"] and "runs_dir" not in groups["isaac_ppo"]
    assert float(groups["isaac_ppo"]["iqm"]) == 11.0 and float(groups["rl_games"]["iqm"]) == 21.0


def test_a_resumed_run_is_not_another_setting(tmp_path, capsys):
    """resume= says where a run continues from, not what it is: it is never a swept key."""
    make_run(str(tmp_path / "a"), ["task=Cartpole", "seed=0"], curve(1.0), seed=0)
    make_run(str(tmp_path / "b"), ["task=Cartpole", "seed=1", "resume=auto"], curve(2.0), seed=1)
    out = run_main([str(tmp_path), "--out", str(tmp_path / "out"), "--reps", "50"], capsys)
    assert "2/2" in out  # one setting of two runs (with resume swept: two settings of one run each)


def test_runs_that_evaluated_are_compared_on_their_final_evaluation(tmp_path):
    """With an eval row midway and final_eval in metrics.json, the default metric is eval.return_mean and each run's
    value is its final evaluation, not its lagged training return nor its last eval row."""
    finals = {}
    for seed, (train_final, mid_eval, end_eval) in enumerate([(90.0, 10.0, 20.0), (80.0, 30.0, 40.0)]):
        folder = make_run(str(tmp_path / "sweep" / str(seed)), overrides(128, seed), curve(train_final), seed=seed)
        rows = [json.loads(line) for line in open(os.path.join(folder, "metrics.jsonl"))]
        rows[2]["eval"] = {"return_mean": mid_eval, "episodes": 64}
        with open(os.path.join(folder, "metrics.jsonl"), "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
        summary = json.load(open(os.path.join(folder, "metrics.json")))
        summary["final_eval"] = {"return_mean": end_eval, "episodes": 64}
        json.dump(summary, open(os.path.join(folder, "metrics.json"), "w"))
        finals[seed] = end_eval
    report = gather([str(tmp_path / "sweep")])
    assert report.metric == "eval.return_mean"
    (group,) = report.groups
    assert sorted(group.finals) == sorted(finals.values())  # 20 and 40: not 90/80 (training) nor 10/30 (mid-run)
    assert gather([str(tmp_path / "sweep")], "window_mean_return").groups[0].finals == [90.0, 80.0]


def test_runs_that_did_not_evaluate_fall_back_to_the_training_return_and_say_so(tmp_path, capsys):
    make_run(str(tmp_path / "runs" / "0"), overrides(128, 0), curve(50.0), seed=0)
    assert main([str(tmp_path / "runs")]) == 0
    assert "metric: window_mean_return (each run's last logged value; a lagged training statistic" in capsys.readouterr().out


def test_time_to_solve_per_threshold_with_a_ci_over_the_runs_that_reached_it(tmp_path, capsys):
    times = {(128, 0): 40.0, (128, 1): 50.0, (128, 2): None, (256, 0): 30.0, (256, 1): 36.0, (256, 2): 33.0}
    for (num_envs, seed), seconds in times.items():
        folder = make_run(str(tmp_path / "sweep" / f"{num_envs}_{seed}"), overrides(num_envs, seed), curve(100.0),
                          seed=seed)
        with open(os.path.join(folder, "metrics.json")) as f:
            summary = json.load(f)
        summary["solve_times"] = [{"threshold": 475.0, "seconds": seconds, "env_steps": 1000 if seconds else None},
                                  {"threshold": 1000.0, "seconds": None, "env_steps": None}]
        with open(os.path.join(folder, "metrics.json"), "w") as f:
            json.dump(summary, f)
    assert main([str(tmp_path / "sweep"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "time to 475 (IQM [CI], reached)" in out and "time to 1000 (IQM [CI], reached)" in out
    assert "0:00:45 [0:00:40, 0:00:50] 2/3" in out  # 128 envs: seeds 0 and 1 reached it, seed 2 never did
    assert "0:00:33 [0:00:30, 0:00:36] 3/3" in out and out.count(" 0/3") == 2
    with open(tmp_path / "out" / "report.csv") as f:
        table = {row["scheduler.num_envs"]: row for row in csv.DictReader(f)}
    assert table["128"]["time_to_475_reached"] == "2" and float(table["128"]["time_to_475_iqm_s"]) == 45.0
    assert float(table["256"]["time_to_475_iqm_s"]) == 33.0 and table["256"]["time_to_1000_reached"] == "0"


def test_time_to_solve_by_a_measure_beside_the_returns_and_named_by_it(tmp_path, capsys):
    """measure_solve_times (a task's solve_measures, e.g. FrankaCabinet's drawer_opened) get columns of their own,
    after the return thresholds', named by the measure: a measure threshold equal to a return threshold is no
    return threshold."""
    times = {0: 40.0, 1: 50.0, 2: None}
    for seed, seconds in times.items():
        folder = make_run(str(tmp_path / "runs" / str(seed)), overrides(128, seed), curve(100.0), seed=seed)
        with open(os.path.join(folder, "metrics.json")) as f:
            summary = json.load(f)
        summary["solve_times"] = [{"threshold": 0.9, "seconds": 5.0, "env_steps": 10}]
        summary["measure_solve_times"] = [
            {"measure": "drawer_opened", "threshold": 0.9, "seconds": seconds, "env_steps": 1000 if seconds else None}]
        with open(os.path.join(folder, "metrics.json"), "w") as f:
            json.dump(summary, f)
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "time to" in line)
    assert header.index("time to 0.9 (IQM") < header.index("time to drawer_opened 0.9 (IQM [CI], reached)")
    assert "0:00:05 [0:00:05, 0:00:05] 3/3" in out and "0:00:45 [0:00:40, 0:00:50] 2/3" in out
    (row,) = read_csv(tmp_path / "out" / "report.csv")
    assert row["time_to_0.9_reached"] == "3" and float(row["time_to_0.9_iqm_s"]) == 5.0
    assert row["time_to_drawer_opened_0.9_reached"] == "2" and float(row["time_to_drawer_opened_0.9_iqm_s"]) == 45.0


def test_a_study_names_its_groups_by_arm(sweep):
    """The study report passes run folder -> arm: groups whose runs share one arm are labelled by it (figures,
    legends), not by their override strings; a group whose runs carry no name or two names keeps its overrides."""
    from isaac_ppo.lab.report.groups import name_groups

    report = gather([str(sweep)], reps=50)
    big, small = sorted(report.groups, key=lambda g: -int(g.values["scheduler.num_envs"]))
    names = {run.path: "wide" for run in big.runs}
    names.update({run.path: "narrow" for run in small.runs[:2]})
    name_groups(report.groups, names)
    assert big.label == "wide"
    assert small.label == "scheduler.num_envs=128"  # two of its runs unnamed: not every run is "narrow"
    names.update({run.path: "other" for run in small.runs[2:]})
    name_groups(report.groups, names)
    assert small.label == "scheduler.num_envs=128"  # two names: no one name fits


def test_runs_below_the_working_directory_are_listed_by_relative_path(sweep, capsys, monkeypatch):
    """A report committed beside its runs (a study's archive) names them as every checkout has them."""
    monkeypatch.chdir(sweep.parent)
    run_main(["multirun", "--reps", "50", "--out", "out"], capsys)
    folders = [row["folder"] for row in read_csv(sweep.parent / "out" / "runs.csv")]
    assert len(folders) == 8 and all(f.startswith("multirun" + os.sep) for f in folders)


def test_named_groups_lead_the_summary_table_with_their_names(sweep):
    from isaac_ppo.lab.report.groups import name_groups
    from isaac_ppo.lab.report.tables import table_rows

    report = gather([str(sweep)], reps=50)
    name_groups(report.groups, {run.path: f"arm{run.overrides['scheduler.num_envs']}"
                                for group in report.groups for run in group.runs})
    headers, rows = table_rows(report)
    assert headers[:3] == ["name", "scheduler.num_envs", "runs"]
    assert sorted(row[0] for row in rows) == ["arm1024", "arm128"] and all(row[0][3:] == row[1] for row in rows)


def test_the_same_runs_give_the_same_report_whatever_the_hash_seed(tmp_path):
    """Keys the first run leaves at their defaults are filled in from its config; their order (the report's
    columns and its groups' order) must not follow a set's, which changes with PYTHONHASHSEED."""
    import subprocess
    import sys

    keys = ["agent.mini_epochs", "scheduler.mode", "agent.network.separate", "num_envs", "agent.horizon",
            "agent.learning_rate"]
    values = {"agent.mini_epochs": ("4", "8"), "scheduler.mode": ("sync", "concurrent"),
              "agent.network.separate": ("false", "true"), "num_envs": ("256", "4096"), "agent.horizon": ("16", "64"),
              "agent.learning_rate": ("1e-3", "3e-3")}
    defaults = ("agent:\n  mini_epochs: 4\n  horizon: 16\n  learning_rate: 1e-3\n  network:\n    separate: false\n"
                "scheduler:\n  mode: sync\nnum_envs: 256\n")
    arms = [("base", [])] + [(f"arm{i}", [f"{key}={values[key][1]}"]) for i, key in enumerate(keys)]
    for i, (name, changed) in enumerate(arms):
        run = make_run(str(tmp_path / "runs" / name), ["task=Cartpole", "seed=0"] + changed, [1.0 + i])
        with open(os.path.join(run, "config.yaml"), "a") as f:  # the defaults each run left alone
            f.write(defaults)
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"out{hash_seed}"
        subprocess.run([sys.executable, "-c", "import sys; from isaac_ppo.lab.report import main; "
                        "sys.exit(main(sys.argv[1:]))", str(tmp_path / "runs"), "--out", str(out)],
                       check=True, capture_output=True, env=dict(os.environ, PYTHONHASHSEED=hash_seed))
        outputs.append(((out / "report.csv").read_text(), (out / "runs.csv").read_text()))
    assert outputs[0] == outputs[1]
    header = outputs[0][0].splitlines()[0]
    # the first run (arm0) leads with its own key; the five it left at their defaults follow in name order
    assert [k for k in header.split(",") if k in keys] == [keys[0]] + sorted(keys[1:])
