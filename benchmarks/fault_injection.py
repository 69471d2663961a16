"""Fault injection against the real isaac-ppo-train (issue 18): kills, simultaneous starts, bad input, a full
disk, a file size limit, non-finite updates and rewards, exploding physics, resume mismatches, preemption.

  python benchmarks/fault_injection.py [--kills 10] [--seed 0] [--work DIR]

Every case runs the console script on a small MuJoCo Cartpole and then checks what it left: every checkpoint
loads and holds only finite tensors, metrics.jsonl holds each iteration once (a torn last line is counted, and
must be dropped by the next start), no run shares a folder, no folder is left by a refused start, and runs that
are continued end bit for bit where an uninterrupted run ends. The last line printed is one JSON object with the
counts (faults injected, bad inputs tried, files checked, data lost). Needs root for the full-disk case (a small
tmpfs); it is skipped, and said so, without.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

import torch

SCRIPT = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
SMALL = ["task=Cartpole", "num_envs=64", "agent.minibatch_size=256", "sim=mujoco", "diagnostics=off"]
counts: Dict[str, int] = {"faults_injected": 0, "kills": 0, "kills_mid_write": 0, "bad_inputs": 0,
                          "files_checked": 0, "torn_lines_left": 0, "data_lost": 0}
problems: List[str] = []


def train(*overrides: str, limit_bytes: int = 0, timeout: int = 300) -> subprocess.CompletedProcess:
    def limit() -> None:
        if limit_bytes:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, resource.RLIM_INFINITY))

    return subprocess.run([SCRIPT, *overrides], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit)


def lost(what: str) -> None:
    counts["data_lost"] += 1
    problems.append(what)
    print(f"  LOST: {what}", flush=True)


def check_folder(run_dir: str, torn_allowed: bool = False) -> List[int]:
    """Every checkpoint loads and is finite; the rows are consecutive iterations, each once (from 0, or from the
    checkpoint a run resumed into a new folder continued). Returns the iterations."""
    from isaac_ppo.io.checkpoint import first_non_finite

    for path in glob.glob(os.path.join(run_dir, "checkpoints", "*.pt")):
        counts["files_checked"] += 1
        try:
            state = torch.load(path, weights_only=False)
        except Exception as error:  # noqa: BLE001 (any failure to load is the finding)
            lost(f"{path} does not load: {error}")
            continue
        if first_non_finite(state) is not None:
            lost(f"{path} holds a non-finite {first_non_finite(state)}")
    iterations: List[int] = []
    jsonl = os.path.join(run_dir, "metrics.jsonl")
    if os.path.exists(jsonl):
        counts["files_checked"] += 1
        lines = open(jsonl).read().split("\n")
        for number, line in enumerate(lines):
            if not line:
                continue
            try:
                iterations.append(json.loads(line)["iteration"])
            except ValueError:
                if number == len(lines) - 1 and torn_allowed:
                    counts["torn_lines_left"] += 1
                else:
                    lost(f"{jsonl} line {number + 1} is not a row")
    first = iterations[0] if iterations else 0
    if iterations != list(range(first, first + len(iterations))):
        lost(f"{jsonl} rows are iterations {iterations}")
    return iterations


def one_line(result: subprocess.CompletedProcess, status: int, words: str, case: str) -> None:
    lines = result.stderr.strip().splitlines()
    if result.returncode != status or len(lines) != 1 or words not in lines[0]:
        problems.append(f"{case}: exit {result.returncode}, stderr {result.stderr.strip()[-300:]!r}")
        print(f"  UNEXPECTED: {problems[-1]}", flush=True)


def same_params(a: str, b: str, case: str) -> None:
    left = torch.load(a, weights_only=False)["model"]
    right = torch.load(b, weights_only=False)["model"]
    if any(not torch.equal(left[k], right[k]) for k in left):
        lost(f"{case}: the continued run's parameters differ from the uninterrupted run's")


def kills(work: str, n: int, rng: random.Random) -> None:
    """kill -9 of a run pinned to one folder, restarted each time in place (the SLURM requeue path), then run to
    the end. Every other kill lands at a random point of the iterations after the restart's first row, the others
    the moment a checkpoint's .tmp appears (mid-write). A 1024x1024 network makes each save ~16 MB, long enough
    to be caught writing; save_interval_iterations=1 saves every iteration."""
    reference = os.path.join(work, "reference")
    job = [*SMALL, "max_iterations=60", "save_interval_iterations=1", "seed=5", "agent.network.hidden=[1024,1024]"]
    if train(*job, f"hydra.run.dir={reference}").returncode != 0:
        raise SystemExit("the reference run failed")
    pinned = os.path.join(work, "killed")
    jsonl = os.path.join(pinned, "metrics.jsonl")
    for k in range(n):
        rows_before = len(open(jsonl).readlines()) if os.path.exists(jsonl) else 0
        process = subprocess.Popen([SCRIPT, *job, f"hydra.run.dir={pinned}"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        deadline = time.time() + 120  # wait for the restarted run to log a row of its own, then kill it at a
        while time.time() < deadline and process.poll() is None and (  # random point of the next iterations
                not os.path.exists(jsonl) or len(open(jsonl).readlines()) <= rows_before):
            time.sleep(0.02)
        if k % 2:
            time.sleep(rng.uniform(0.0, 1.5))  # an iteration and its saves take ~0.5-1 s here
        else:
            while process.poll() is None and not glob.glob(os.path.join(pinned, "checkpoints", "*.tmp")):
                time.sleep(0.001)
        mid_write = bool(glob.glob(os.path.join(pinned, "**", "*.tmp"), recursive=True))
        process.kill()
        process.wait()
        counts["kills"] += 1
        counts["faults_injected"] += 1
        counts["kills_mid_write"] += int(mid_write)  # (a .tmp there just before the kill: its write had begun)
        done = check_folder(pinned, torn_allowed=True) if os.path.isdir(pinned) else []
        print(f"  kill {k + 1}/{n}: {len(done)} rows on disk", flush=True)
        if len(done) >= 60:
            break
    final = train(*job, f"hydra.run.dir={pinned}")
    if final.returncode != 0:
        lost(f"the run killed {n} times did not finish: {final.stderr.strip()[-300:]}")
        return
    check_folder(pinned)
    same_params(os.path.join(reference, "checkpoints", "last.pt"), os.path.join(pinned, "checkpoints", "last.pt"),
                "kill -9")


def simultaneous(work: str, n: int) -> None:
    """Two runs of one experiment started at once, n times: never one folder; each folder is its own seed's."""
    runs = os.path.join(work, "together")
    for _ in range(n):
        started = [subprocess.Popen([SCRIPT, *SMALL, "max_iterations=2", f"seed={s}", f"runs_dir={runs}",
                                     "experiment=twins"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                   for s in (1, 2)]
        for process in started:
            process.wait()
        counts["faults_injected"] += 1
    folders = sorted(glob.glob(os.path.join(runs, "twins", "*")))
    if len(folders) != 2 * n:
        lost(f"{2 * n} simultaneous runs left {len(folders)} folders")
    for folder in folders:
        seed = [line for line in open(os.path.join(folder, "config.yaml")) if line.startswith("seed:")]
        rows = check_folder(folder)
        if len(seed) != 1 or rows != [0, 1]:
            lost(f"{folder}: seed lines {seed}, rows {rows}")


BAD_INPUTS = [
    (["agent.learning_rate=-1"], "agent.learning_rate"), (["agent.gamma=1.5"], "agent.gamma"),
    (["agent.network.hidden=[]"], "agent.network.hidden"), (["agent.network.hidden=[64,0]"], "agent.network.hidden"),
    (["+unknown_key=1"], "unknown_key"), (["task=ant"], "did you mean task=Ant"), (["num_envs=0"], "num_envs"),
    (["agent.minibatch_size=1000"], "minibatch"), (["scheduler=nothing"], "scheduler"),
    (["max_diverged_fraction=2"], "max_diverged_fraction"), (["diagnostics.tau=1.5"], "diagnostics.tau"),
    (["test=true"], "checkpoint"), (["resume=/nonexistent/last.pt"], "checkpoint not found"),
    (["agent.lam=-0.1"], "agent.lam"), (["agent.clip=0"], "agent.clip"), (["save_interval_iterations=0"], "save_interval_iterations"),
    (["max_env_steps=100"], "max_env_steps"), (["sim=isaacgym"], "Isaac Gym"),
    (["runs_dir=/etc/hostname/runs"], "runs_dir"), (["task.env.episodeLength=2.5"], "episodeLength"),
]


def bad_inputs(work: str) -> None:
    """Each bad value: exit 2, one line naming it, no run folder."""
    for overrides, words in BAD_INPUTS:
        runs = os.path.join(work, "bad")
        result = train(*SMALL, f"runs_dir={runs}", *overrides)
        counts["bad_inputs"] += 1
        one_line(result, 2, words, f"bad input {overrides}")
        if glob.glob(os.path.join(runs, "*", "*")):
            problems.append(f"bad input {overrides} left a run folder")
            shutil.rmtree(runs)


def full_disk(work: str) -> None:
    """A 700 kB tmpfs fills up mid-run; then ulimit -f below a checkpoint's size. Nothing on disk is lost, and
    after space is freed resume=auto finishes the run."""
    disk = os.path.join(work, "disk")
    os.makedirs(disk)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=700k", "tmpfs", disk], capture_output=True).returncode:
        print("  full disk: skipped (cannot mount a tmpfs here)", flush=True)
    else:
        try:
            job = [*SMALL, "max_iterations=12", f"runs_dir={disk}", "experiment=full", "seed=6"]
            result = train(*job, "save_interval_iterations=1")
            counts["faults_injected"] += 1
            one_line(result, 1, "No space left on device", "full disk")
            (first,) = glob.glob(os.path.join(disk, "full", "*"))
            check_folder(first)
            for numbered in glob.glob(os.path.join(first, "checkpoints", "iter_*.pt")):
                os.remove(numbered)
            resumed = train(*job, "resume=auto", "save_interval_iterations=100")
            if resumed.returncode != 0:
                lost(f"resume after freeing space failed: {resumed.stderr.strip()[-300:]}")
            else:
                (second,) = [d for d in glob.glob(os.path.join(disk, "full", "*")) if d != first]
                counts["files_checked"] += 1
                rows = [json.loads(line)["iteration"] for line in open(os.path.join(second, "metrics.jsonl"))]
                if rows[-1] != 11:
                    lost(f"the resumed run ended at iteration {rows[-1]}")
        finally:
            subprocess.run(["umount", disk], capture_output=True)
    limited = os.path.join(work, "limited")
    result = train(*SMALL, "max_iterations=6", "save_interval_iterations=3", f"runs_dir={limited}", limit_bytes=40_000)
    counts["faults_injected"] += 1
    one_line(result, 1, "File too large", "ulimit -f")
    for folder in glob.glob(os.path.join(limited, "*", "*")):
        check_folder(folder)


def non_finite_and_divergence(work: str) -> None:
    """NaN by configuration: an infinite reward scale in a run resumed from a good one, and a learning rate of 1e3
    in a fresh run (a resumed run keeps its checkpoint's learning rate); and exploding physics: one line, exit 2,
    the good run's checkpoints unchanged and every checkpoint left finite."""
    folder = os.path.join(work, "nan")
    if train(*SMALL, "max_iterations=2", "save_interval_iterations=1", f"hydra.run.dir={folder}").returncode != 0:
        raise SystemExit("the good run before the NaN cases failed")
    before = {p: open(p, "rb").read() for p in glob.glob(os.path.join(folder, "checkpoints", "*.pt"))}
    resume = f"resume={os.path.join(folder, 'checkpoints', 'last.pt')}"
    for overrides, words in ((["agent.reward_scale=1e39", resume], "non-finite reward"),  # (float32 overflow)
                             (["agent.learning_rate=1e3", "agent.lr_schedule=constant"], "non-finite")):
        result = train(*SMALL, "max_iterations=30", "save_interval_iterations=1", *overrides, f"runs_dir={work}/nan_runs")
        counts["faults_injected"] += 1
        one_line(result, 2, words, f"non-finite {overrides}")
    if {p: open(p, "rb").read() for p in before} != before:
        lost("a NaN run changed the good run's checkpoints")
    for run_dir in [folder] + glob.glob(os.path.join(work, "nan_runs", "*", "*")):
        check_folder(run_dir)
    result = train(*SMALL, "max_iterations=3", "task.env.maxEffort=1e9", f"runs_dir={work}/boom")
    counts["faults_injected"] += 1
    one_line(result, 2, "task.env.maxEffort", "exploding physics")
    if "unstable" in result.stdout:
        problems.append("MuJoCo's warnings reached the console")
    for run_dir in glob.glob(os.path.join(work, "boom", "*", "*")):
        check_folder(run_dir)


def resumes(work: str) -> None:
    """SIGTERM mid-run (exit 75, then resume=auto ends bit for bit as an uninterrupted run), and resumes that are
    not this run's (another seed; a finished run): one line, exit 2, no folder left."""
    runs = os.path.join(work, "resumes")
    job = [*SMALL, "max_iterations=10", "seed=8", f"runs_dir={runs}"]
    if train(*job, "experiment=whole").returncode != 0:
        raise SystemExit("the uninterrupted run failed")
    process = subprocess.Popen([SCRIPT, *job, "experiment=cut"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and not any(
            sum(1 for _ in open(p)) >= 2 for p in glob.glob(os.path.join(runs, "cut", "*", "metrics.jsonl"))):
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    counts["faults_injected"] += 1
    if process.returncode != 75:
        problems.append(f"SIGTERM: exit {process.returncode}, not 75")
    time.sleep(1.1)
    if train(*job, "experiment=cut", "resume=auto").returncode != 0:
        lost("resume=auto after SIGTERM failed")
    else:
        cut = sorted(glob.glob(os.path.join(runs, "cut", "*")))
        for folder in cut:
            check_folder(folder) if folder == cut[0] else None
        same_params(glob.glob(os.path.join(runs, "whole", "*", "checkpoints", "last.pt"))[0],
                    os.path.join(cut[-1], "checkpoints", "last.pt"), "SIGTERM + resume=auto")
    before = sorted(glob.glob(os.path.join(runs, "*", "*")))
    for overrides, words in ((["experiment=whole", "seed=9", "resume=auto"], "none with this config"),
                             (["experiment=whole", "resume=auto"], "finished run")):
        result = train(*[o for o in job if not o.startswith("seed=")], *overrides,
                       *(["seed=8"] if "seed=9" not in overrides else []))
        counts["bad_inputs"] += 1
        one_line(result, 2, words, f"resume {overrides}")
    if sorted(glob.glob(os.path.join(runs, "*", "*"))) != before:
        problems.append("a refused resume left a folder")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="isaac-ppo-faults-")
    started = time.time()
    for name, case in (("kill -9", lambda: kills(work, args.kills, random.Random(args.seed))),
                       ("simultaneous starts", lambda: simultaneous(work, 3)),
                       ("bad input", lambda: bad_inputs(work)),
                       ("full disk and file size limit", lambda: full_disk(work)),
                       ("non-finite and exploding physics", lambda: non_finite_and_divergence(work)),
                       ("preemption and resume mismatches", lambda: resumes(work))):
        print(f"[faults] {name}", flush=True)
        case()
    print(json.dumps(dict(counts, problems=problems, seconds=round(time.time() - started), work=work)))


if __name__ == "__main__":
    main()
