"""isaac-ppo-tune on a toy budget, for real: the console script, real isaac-ppo-train trials (Cartpole, a few
iterations), a real Optuna study in SQLite, resumed after a finished sweep, after SIGTERM and after SIGKILL."""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow
optuna = pytest.importorskip("optuna", reason="optuna is in the test extra: pip install -e '.[test]'")

from isaac_ppo.lab.tune import load_space  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-tune")


def tune(tmp_path, *args, timeout=180):
    return subprocess.run([SCRIPT, *args, f"runs_dir={tmp_path}"], capture_output=True, text=True, timeout=timeout)


def trials_of(tmp_path, study):
    storage = f"sqlite:///{tmp_path}/tune/{study}/study.db"
    return optuna.load_study(study_name=study, storage=storage).get_trials()


def finished(trials):
    return [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]


def test_toy_study_runs_then_resumes_counting_trials_from_storage(tmp_path):
    first = tune(tmp_path, "space=cartpole_toy", "trials=2", "study=toy")  # (2, then 3: each trial is a run)
    assert first.returncode == 0, first.stdout + first.stderr
    trials = trials_of(tmp_path, "toy")
    assert len(finished(trials)) == 2 and len(trials) == 2
    start = load_space("cartpole_toy")["start"][0]  # a new study tries the space's start point first
    assert trials[0].params == start and trials[0].user_attrs["start_point"] and trials[1].params != start
    assert first.stdout.count("[tune] trial ") >= 4  # a command line and an outcome per trial
    folder = tmp_path / "tune" / "toy"
    best = json.loads((folder / "best.json").read_text())
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert complete and best["value"] == min(t.value for t in complete)
    assert "task=Cartpole" in best["overrides"] and any(o.startswith("agent.mini_epochs=") for o in best["overrides"])
    with open(folder / "history.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["number"] for r in rows] == ["0", "1"] and "agent.learning_rate" in rows[0]
    from isaac_ppo.lab.report.clock import machine, machine_label

    here = machine_label(machine())  # the seconds are this machine's: each trial says which it ran on
    assert {r["machine"] for r in rows} == {here} and here.endswith(" cores")
    for t in complete:  # a trial's value: seconds to the threshold, or the cap plus the gap
        if t.user_attrs["solved_s"] is not None:
            assert t.value == pytest.approx(t.user_attrs["solved_s"]) and t.value <= 30
        else:
            assert 30 <= t.value <= 60

    second = tune(tmp_path, "space=cartpole_toy", "trials=3", "study=toy")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "2/3 trials finished" in second.stdout
    assert "another machine" not in second.stdout  # resumed on the same machine: nothing to warn of
    trials = trials_of(tmp_path, "toy")
    assert len(trials) == 3 and len(finished(trials)) == 3
    # the first two were not run again: one run folder per trial
    assert all(len(os.listdir(folder / "trials" / f"trial_{n}")) == 1 for n in range(3))


def _start_then_signal(tmp_path, study, signum, number):
    """Start a one-trial sweep and send signum to the tuner once its trial `number`'s isaac-ppo-train runs."""
    process = subprocess.Popen([SCRIPT, "space=cartpole_toy", "trials=1", f"study={study}", f"runs_dir={tmp_path}"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = tmp_path / "tune" / study / "trials" / f"trial_{number}.log"
    deadline = time.time() + 60
    while time.time() < deadline and not log.is_file():
        time.sleep(0.1)
    time.sleep(0.5)
    process.send_signal(signum)
    out, _ = process.communicate(timeout=60)
    return process.returncode, out


def test_a_killed_sweep_resumes_with_the_interrupted_trial_retried(tmp_path):
    code, out = _start_then_signal(tmp_path, "k", signal.SIGTERM, 0)
    assert code == 75, out
    assert "run the same command to resume" in out
    trials = trials_of(tmp_path, "k")
    assert [t.state.name for t in trials] == ["FAIL", "WAITING"]  # its parameters queued again

    code, out = _start_then_signal(tmp_path, "k", signal.SIGKILL, 1)
    assert code == -signal.SIGKILL
    assert [t.state.name for t in trials_of(tmp_path, "k")] == ["FAIL", "RUNNING"]  # left behind by the kill

    resumed = tune(tmp_path, "space=cartpole_toy", "trials=1", "study=k")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "trial 1 was running when its tuner died" in resumed.stdout
    trials = trials_of(tmp_path, "k")
    assert [t.state.name for t in trials][:2] == ["FAIL", "FAIL"] and len(finished(trials)) == 1
    assert trials[2].params == trials[1].params == trials[0].params  # the same point, retried each time
    assert (tmp_path / "tune" / "k" / "history.csv").is_file()


@pytest.mark.parametrize("args, fragment", [
    (["space=nosuch", "trials=2", "study=s"], "space=nosuch: no search space"),
    (["space=cartpole_toy", "trials=0", "study=s"], "trials=0 is outside its domain: an integer in [1, inf)"),
    (["space=cartpole_toy", "study=s"], "missing trials="),
    (["space=cartpole_toy", "trials=2", "study=s", "trial_cap_s=-5"], "trial_cap_s=-5"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    result = tune(tmp_path, *args, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("isaac-ppo-tune: "), result.stderr
    assert not (tmp_path / "tune").exists()  # nothing is made before the input is checked


def test_a_trial_is_judged_by_the_pruner_only_from_its_first_evaluation(tmp_path):
    """Issue 44's search pruned trials at 20 s for not having evaluated yet (an evaluation every 500,000 env steps
    comes ~15 s in): a trial is reported to the pruner from its first evaluation on. A stand-in for isaac-ppo-train
    writes two rows a second apart (10 s of training without an evaluation, then 20 s with one); a pruner that
    would prune at once is asked only about the ticks after the evaluation."""
    import optuna

    from isaac_ppo.lab.tune import run_trial

    class Trial:
        number = 0
        reports, asked = [], []

        def report(self, value, step):
            self.reports.append(step)

        def should_prune(self):
            self.asked.append(self.reports[-1])
            return True

        def set_user_attr(self, key, value):
            pass

    folder = tmp_path / "trials" / "trial_0" / "run"
    writer = (
        "import json, sys, time\n"
        f"path = {str(folder / 'metrics.jsonl')!r}\n"
        "rows = [{'wall_s': 10.0, 'env_steps': 1}, {'wall_s': 20.0, 'env_steps': 2, 'eval': {'return_mean': 5.0, "
        "'wall_s': 20.0, 'seconds': 0.0, 'env_steps': 2}}]\n"
        "for row in rows:\n"
        "    with open(path, 'a') as f:\n"
        "        f.write(json.dumps(row) + '\\n')\n"
        "    time.sleep(1.0)\n"
    )
    folder.mkdir(parents=True)
    space = {"threshold": 3000.0, "report_every_s": 5.0}
    with pytest.raises(optuna.TrialPruned):
        run_trial(Trial(), [sys.executable, "-c", writer], str(tmp_path / "trials"), space, cap_s=120.0)
    assert Trial.reports and min(Trial.reports) >= 3  # ticks 1 and 2 (5 s, 10 s) came before any evaluation
    assert Trial.asked == [min(Trial.reports)]


def test_a_study_resumed_on_another_machine_says_so():
    """The objective is seconds: trials timed on another CPU kind are named, with how many, when a study resumes."""
    from isaac_ppo.lab.tune import other_machines

    class Trial:
        def __init__(self, state, machine):
            self.state, self.user_attrs = type("S", (), {"name": state})(), {"machine": machine}

    here, there = "AMD EPYC, avx2+avx512f, 2 cores", "Intel Xeon, avx2, 2 cores"
    assert other_machines([Trial("COMPLETE", here), Trial("PRUNED", here)], here) is None
    assert other_machines([Trial("FAIL", there), Trial("RUNNING", there)], here) is None  # no seconds counted
    note = other_machines([Trial("COMPLETE", here), Trial("COMPLETE", there), Trial("PRUNED", there)], here)
    assert note and "2 on Intel Xeon, avx2, 2 cores" in note and here in note
