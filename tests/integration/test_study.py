"""isaac-ppo-study on a toy budget, for real: the console script, real isaac-ppo-train runs (Cartpole, two splits,
two seeds, a few iterations), killed mid-study, resumed (the cut run continued in place, the finished ones
skipped), then the report."""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time

import pytest

from isaac_ppo.lab import archive

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-study")


def study(tmp_path, *args, timeout=240):
    return subprocess.run([SCRIPT, *args, f"runs_dir={tmp_path}"], capture_output=True, text=True, timeout=timeout)


def complete_rows(folder):
    path = folder / "metrics.jsonl"
    return path.read_text().splitlines()[:-1] if path.is_file() else []  # (the last may be mid-write)


def rows(folder):
    with open(folder / "metrics.jsonl") as f:
        return [json.loads(line) for line in f]


def start_and_stop_when(tmp_path, folder, stop):
    """Start the study in a process group of its own, and `stop` it once `folder`'s run logged its first iteration
    (it then stops at the end of one of iterations 2-4 of its 5: a toy iteration takes ~0.07 s on a fast machine,
    so stopping at the second row left too little headroom for the signal's way under a loaded CI and the run
    could finish all 5 first; 2026-12-01)."""
    process = subprocess.Popen([SCRIPT, "run", "cartpole_toy", f"runs_dir={tmp_path}"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(complete_rows(folder)) < 1:
        time.sleep(0.01)
    stop(process)
    out, _ = process.communicate(timeout=60)
    for _ in range(200):  # the run saves and writes its summary as it stops
        if (folder / "metrics.json").is_file():
            break
        time.sleep(0.1)
    assert json.loads((folder / "metrics.json").read_text())["stopped_by"] == "SIGTERM", out
    assert not (folder / "study_done.json").exists()
    assert 1 <= len(rows(folder)) < 5  # stopped mid-run, at an iteration boundary
    return process.returncode, out


def test_a_study_runs_is_stopped_and_killed_resumes_in_place_and_reports(tmp_path):
    root = tmp_path / "study" / "cartpole_toy"
    runs = {(arm, seed): root / "runs" / arm / f"seed_{seed}" for arm in ("envs64_rollout8", "envs32_rollout16")
            for seed in (0, 1)}
    # Ctrl-C at the terminal (SIGINT to the foreground process group): the study alone gets it and stops its run
    # with one SIGTERM (the run is in a session of its own; a second signal would make it abort without saving)
    code, out = start_and_stop_when(tmp_path, runs["envs32_rollout16", 0],
                                    lambda p: os.killpg(os.getpgid(p.pid), signal.SIGINT))
    assert code == 75 and "stopped by signal 2: run the same command to continue" in out, out
    first = runs["envs64_rollout8", 0]
    assert (first / "study_done.json").is_file(), out
    done_at = (first / "study_done.json").stat().st_mtime

    # killed outright: its run is told by the kernel (it dies with its parent) and saves
    _, out = start_and_stop_when(tmp_path, runs["envs64_rollout8", 1], lambda p: p.kill())
    assert "envs32_rollout16 seed 0: continuing" in out and "1/4 runs done" in out
    assert (first / "study_done.json").stat().st_mtime == done_at  # finished: skipped, not run again

    resumed = study(tmp_path, "run", "cartpole_toy")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "2/4 runs done" in resumed.stdout and "envs64_rollout8 seed 1: continuing" in resumed.stdout
    for (arm, seed), folder in runs.items():
        record = json.loads((folder / "study_done.json").read_text())
        assert record["ended_by"] == "budget" and record["env_steps"] == 5 * 512
        assert record["machine"]["cores"] >= 1 and record["machine"]["torch"]  # where it ran, for the report
        assert [r["iteration"] for r in rows(folder)] == list(range(5))  # continued in place, no row twice
    for arm, seed in (("envs32_rollout16", 0), ("envs64_rollout8", 1)):
        log = (root / "logs" / f"{arm}_seed_{seed}.log").read_text()
        assert f"resuming from {runs[arm, seed] / 'checkpoints' / 'last.pt'}" in log
    again = study(tmp_path, "run", "cartpole_toy")
    assert "4/4 runs done" in again.stdout and "starting" not in again.stdout

    report = study(tmp_path, "report", "cartpole_toy")
    assert report.returncode == 0, report.stdout + report.stderr
    out = root / "report"
    summary = json.loads((out / "study.json").read_text())
    assert set(summary["arms"]) == {"envs64_rollout8", "envs32_rollout16"}
    assert summary["thresholds"] == [475.0]  # the task's own
    for arm, values in summary["arms"].items():
        assert values["runs"] == 2 and len(values["clock_s"]) == 2
        assert sum(values["time_shares"].values()) == pytest.approx(1.0, abs=0.01)
        copies = archive.read(str(out / "metrics.tar.xz"))  # (no archive: the report keeps the rows, packed)
        assert sorted(copies) == sorted(f"{a}_seed_{seed}.jsonl" for a in summary["arms"] for seed in (0, 1))
        evals = [json.loads(line)["eval"]["return_mean"] for line in copies[f"{arm}_seed_0.jsonl"].decode().splitlines()
                 if "eval" in json.loads(line)]
        own = [r["eval"]["return_mean"] for r in rows(root / "runs" / arm / "seed_0") if "eval" in r]
        assert evals == own and len(own) == 2  # the copies hold the runs' own numbers
    for figure in ("eval_vs_seconds.png", "eval_vs_env_steps.png"):
        assert (out / figure).stat().st_size > 10_000
    study_md = (out / "study.md").read_text()
    assert "| envs64_rollout8 | 2 |" in study_md and "| clock per run, s (median) |" in study_md
    clock = statistics.median(summary["arms"]["envs64_rollout8"]["clock_s"])
    assert next(line for line in study_md.splitlines() if line.startswith("| envs64_rollout8 |")).endswith(
        f"| {clock:g} |")  # the wall time a run of the arm takes, for whoever reruns it
    assert summary["machines"] and "isaac-ppo-study run cartpole_toy arms=envs32_rollout16" in (out / "study.md").read_text()
    assert (out / "report.md").is_file()  # isaac-ppo-report's table over the runs that ended on their budget
    assert "2/2" in (out / "report.md").read_text()

    # the comparisons, on the runs' own numbers
    compared = json.loads((out / "compare.json").read_text())
    final, auc, rank = compared["comparisons"]
    runs = {arm: [root / "runs" / arm / f"seed_{seed}" for seed in (0, 1)] for arm in summary["arms"]}
    finals = {arm: [json.loads((f / "metrics.json").read_text())["final_eval"]["return_mean"] for f in folders]
              for arm, folders in runs.items()}
    assert final["mean_a"] == pytest.approx(sum(finals["envs64_rollout8"]) / 2)
    assert final["difference"] == pytest.approx(final["mean_a"] - final["mean_b"])
    low, high = final["ci95"]
    assert low <= final["difference"] <= high and 0 < final["p_permutation"] <= 1
    assert auc["matched_points"] == 2  # both arms evaluated at 1024 and 2048 env steps
    ranks = [[r["diagnostics"]["feature_rank"] for r in rows(f) if "diagnostics" in r] for f in runs["envs32_rollout16"]]
    assert all(ranks) and rank["mean_b"] == pytest.approx(sum(sum(r) / len(r) for r in ranks) / 2)
    for c in compared["comparisons"]:
        assert c["verdict"] in ("supported", "contradicted", "inconclusive at this budget")
    assert [p["diagnostic"] for p in compared["predictions"]] == ["feature_rank", "dormant_fraction", "adaptive_stress"]
    assert all(p["runs"] == 4 for p in compared["predictions"])
    table = (out / "compare.md").read_text()
    assert "| toy | envs64_rollout8 vs envs32_rollout16 | final | a > b |" in table
    verdicts = {c["verdict"] for c in compared["comparisons"]}
    overall = ("supported" if verdicts == {"supported"} else "mixed" if {"supported", "contradicted"} <= verdicts
               else "contradicted" if "contradicted" in verdicts and "supported" not in verdicts
               else "inconclusive at this budget")
    assert table.splitlines()[2].endswith(f"| {overall} |")  # the claims table: one verdict per claim
    # the budget (2,560 env steps) does not end on an evaluation (the last at 2,048): no final policy was evaluated
    # twice, so there is no second reading (report/retest.py; tests/unit/test_retest.py has one)
    assert not (out / "retest.json").exists() and not (out / "retest.md").exists()
    assert "| untested | more epochs overfit |  | not tested in this study: no arm varies the epochs |" in table
    assert "](compare.png)" in table and (out / "compare.png").read_bytes()[:4] == b"\x89PNG"  # the claims' figure
    # and a panel a claim, the curves behind each verdict
    assert "](claim_curves.png)" in table and (out / "claim_curves.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args, fragment", [
    (["run", "nosuch"], "nosuch: no study"),
    (["run", "cartpole_toy", "arms=nosuch"], "arms=nosuch: the study's arms are envs64_rollout8, envs32_rollout16"),
    (["run", "cartpole_toy", "seeds=7"], "seeds=7: the study's seeds are [0, 1]"),
    (["run", "cartpole_toy", "seed=3"], "seed=3: the study sets seed"),
    (["report", "cartpole_toy"], "no finished run of study cartpole_toy yet"),
    (["walk", "cartpole_toy"], "usage: isaac-ppo-study"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    result = study(tmp_path, *args, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert fragment in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_run_that_stops_itself_is_an_outcome_but_a_refused_one_stops_the_study(tmp_path):
    """The divergence guard ends a run that trained (exit 2 after its rows): that run is done, marked so, and the
    study goes on to the next; a run refused before it trained (a bad key) is the study's mistake: one line, exit 2."""
    definition = tmp_path / "guard.yaml"
    definition.write_text(
        "common: [task=Cartpole, sim=mujoco, diagnostics=off, num_envs=32, agent.minibatch_size=256, "
        "max_iterations=2, eval.interval_env_steps=0, save_interval_iterations=1]\n"
        "arms:\n"
        "  diverging: [task.mujoco.max_abs_qvel=0.000001]   # every step of every env 'diverges'\n"
        "  healthy: []\n"
        "seeds: [0]\n")
    result = study(tmp_path, "run", str(definition))
    assert result.returncode == 0, result.stdout + result.stderr
    runs = tmp_path / "study" / "guard" / "runs"
    record = json.loads((runs / "diverging" / "seed_0" / "study_done.json").read_text())
    assert record["ended_by"] == "stopped itself" and "simulation diverged" in record["message"]
    assert json.loads((runs / "healthy" / "seed_0" / "study_done.json").read_text())["ended_by"] == "budget"
    assert "diverging seed 0: stopped itself" in result.stdout
    report = study(tmp_path, "report", str(definition))
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "study" / "guard" / "report" / "study.md").read_text()
    assert "Runs that ended early:\n- diverging seed 0: stopped itself after" in text and "simulation diverged" in text
    arms = json.loads((tmp_path / "study" / "guard" / "report" / "study.json").read_text())["arms"]
    diverging = [json.loads(line) for line in (runs / "diverging" / "seed_0" / "metrics.jsonl").read_text().splitlines()]
    assert arms["diverging"]["diverged_per_million"] == round(
        1e6 * sum(r["diverged"] for r in diverging) / diverging[-1]["env_steps"], 2) > 0
    assert arms["healthy"]["diverged_per_million"] == 0
    definition.write_text(definition.read_text().replace("healthy: []", "healthy: [agent.no_such_key=1]")
                          .replace("seeds: [0]", "seeds: [1]"))
    refused = study(tmp_path, "run", str(definition))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "healthy seed 1: isaac-ppo-train said:" in refused.stderr and "no_such_key" in refused.stderr


def test_an_rl_games_run_the_study_stops_at_its_goal_is_done(tmp_path):
    """rl-games' learner stops at the end of the epoch a SIGTERM arrives in and exits 1 (it cannot be resumed): when
    the study sent it (at_return), the run ended as asked and is done, not failed (the memory proof's rl-games arm,
    cfg/study/cartpole_memory.yaml, 2026-12-04)."""
    definition = tmp_path / "peer.yaml"
    definition.write_text(
        "common: [task=Cartpole, sim=mujoco, diagnostics=off, num_envs=64, agent.minibatch_size=512, "
        "max_iterations=200, eval.interval_env_steps=1024, eval.num_envs=8]\n"
        "arms:\n  rl_games: [agent=rl_games]\n"
        "seeds: [0]\nstop: {at_return: 1}\n")
    result = study(tmp_path, "run", str(definition))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rl_games seed 0: at_return" in result.stdout, result.stdout
    folder = tmp_path / "study" / "peer" / "runs" / "rl_games" / "seed_0"
    assert json.loads((folder / "study_done.json").read_text())["ended_by"] == "at_return"
    assert len(rows(folder)) < 200  # stopped at its goal, not at the budget


@pytest.mark.parametrize("packed", [True, False], ids=["pack", "folder"])
def test_an_archived_study_is_done_on_a_fresh_machine_and_reports_from_its_archive(tmp_path, packed):
    """archive: each finished run's small files are archived out of runs_dir (a study carried in git across
    sessions whose runs_dir is lost): on a machine with only the archive, `run` starts nothing and `report` reads it.
    The archive is a pack (NAME.tar.xz, what the shipped studies keep) or a folder."""
    definition = tmp_path / "kept.yaml"
    where = tmp_path / ("archive.tar.xz" if packed else "archive")
    definition.write_text(
        "common: [task=Cartpole, sim=mujoco, diagnostics=off, num_envs=32, agent.minibatch_size=256, "
        "max_iterations=2, eval.interval_env_steps=256, eval.num_envs=8, save_interval_iterations=1]\n"
        "arms: {small: []}\n"
        f"seeds: [0, 1]\narchive: {where}\n")
    first = subprocess.run([SCRIPT, "run", str(definition), "seeds=0", f"runs_dir={tmp_path / 'a'}"],
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stdout + first.stderr
    kept = archive.read(str(where)) if packed else {
        os.path.relpath(os.path.join(d, n), where).replace(os.sep, "/"): open(os.path.join(d, n), "rb").read()
        for d, _, names in os.walk(where) for n in names}
    run = tmp_path / "a" / "study" / "kept" / "runs" / "small" / "seed_0"
    assert (run / "checkpoints" / "last.pt").is_file() and (run / "tb").is_dir()
    assert sorted(kept) == ["small/seed_0/" + name for name in (
        ".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml", "config.yaml", "metrics.json",
        "metrics.jsonl", "study_done.json")]  # no checkpoints, TensorBoard files or train.log
    assert kept["small/seed_0/metrics.jsonl"] == (run / "metrics.jsonl").read_bytes()

    # another machine: a new runs_dir, the archive alone
    again = subprocess.run([SCRIPT, "run", str(definition), f"runs_dir={tmp_path / 'b'}"], capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1/2 runs done" in again.stdout and "small seed 0: starting" not in again.stdout
    assert "small seed 1: starting" in again.stdout
    second = "small/seed_1/study_done.json"
    assert (second in archive.read(str(where))) if packed else (where / second).is_file()
    report = subprocess.run([SCRIPT, "report", str(definition), f"runs_dir={tmp_path / 'c'}"], capture_output=True,
                            text=True, timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    summary = json.loads((tmp_path / "c" / "study" / "kept" / "report" / "study.json").read_text())
    assert summary["arms"]["small"]["runs"] == 2
    assert "2/2" in (tmp_path / "c" / "study" / "kept" / "report" / "report.md").read_text()
    assert not (tmp_path / "c" / "study" / "kept" / "report" / "metrics.tar.xz").exists()  # the rows: in the archive
    listed = (tmp_path / "c" / "study" / "kept" / "report" / "runs.csv").read_text()
    assert str(tmp_path / "archive" / "small" / "seed_0") in listed  # (a packed run named as in the folder)


def test_an_archive_that_is_not_a_folder_name_is_refused(tmp_path):
    definition = tmp_path / "bad.yaml"
    definition.write_text("common: [task=Cartpole]\narms: {a: []}\nseeds: [0]\narchive: [1, 2]\n")
    result = study(tmp_path, "run", str(definition), timeout=60)
    assert result.returncode == 2 and "archive must be a folder" in result.stderr and "Traceback" not in result.stderr


def test_a_locomotion_run_gets_the_gait_check_before_its_checkpoints_are_left_behind(tmp_path):
    """A finished Ant run's study_done.json carries its last policy's gait check (the archive keeps no checkpoint
    to check later), and the report lists it in gait.md."""
    definition = tmp_path / "walk.yaml"
    definition.write_text(
        "common: [task=Ant, sim=mujoco, diagnostics=off, num_envs=64, agent.horizon=16, agent.minibatch_size=512, "
        "max_iterations=1, eval.interval_env_steps=0, save_interval_iterations=1]\n"
        "arms: {tiny: []}\nseeds: [0]\n")
    result = study(tmp_path, "run", str(definition))
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads((tmp_path / "study" / "walk" / "runs" / "tiny" / "seed_0" / "study_done.json").read_text())
    gait = record["gait"]
    assert gait["task"] == "Ant" and gait["envs"] == 64 and gait["steps"] == 1000
    p50, p90, p99 = gait["torso_speed_p50_p90_p99"]
    assert 0 < p50 <= p90 <= p99 <= gait["torso_speed_max"] < 20  # (one iteration: an untrained policy)
    up_p5, up_p50 = gait["up_proj_p5_p50"]
    assert -1 <= up_p5 <= up_p50 <= 1 and 0 < gait["torso_height_p50"] < 2
    report = study(tmp_path, "report", str(definition))
    assert report.returncode == 0, report.stderr
    table = (tmp_path / "study" / "walk" / "report" / "gait.md").read_text()
    assert f"| tiny | 0 | {p50:.2f} / {p90:.2f} / {p99:.2f} |" in table
