"""Issue 24's confirmation: Ant with the CPU profile against IsaacGymEnvs' settings, on fresh seeds, by wall clock.

    python benchmarks/cpu_profile_confirm.py run [--arm NAME=OVERRIDES ...] [--seeds 100,101,102,103,104]
                                                 [--minutes 25] [--runs-dir runs/confirm]
    python benchmarks/cpu_profile_confirm.py report OUT.png [--runs-dir runs/confirm]

``run`` trains every (arm, seed) as its own isaac-ppo-train (task=Ant sim=mujoco diagnostics=off, an evaluation
every 250,000 env steps on 64 envs as in the search, the arm's overrides, the seed) and stops it with SIGTERM
once its training clock, evaluation included, passes --minutes. Default arms: ``isaacgymenvs`` (no override:
IsaacGymEnvs' AntPPO values at 4096 envs) and ``cpu`` (profile=cpu); --arm replaces them. --stop-at-return 3000
also stops a run at its first evaluation reaching 3000 (a time-to-solve confirmation). Seeds 100-104 were never used by the search
(trial n trains seed n). Resumable: a finished run (its folder holds confirm_done.json) is skipped; a cut one
(the machine or the session stopped) continues in place with resume=auto, its clock going on from its last
checkpoint (save_interval=10). Run it on a quiet machine: the figure is wall clock.

``report`` reads the runs: per arm, the seconds and env steps to an evaluation return of 3000 and of 6000 (median
and 95% bootstrap CI over seeds; a seed that never reached it counts as not reached), the evaluation return at
2, 10 and 25 minutes (the last evaluation at or before), where the time went (collect, update, evaluation, the
rest) with the run's steps per second, and one PNG of evaluation return against wall-clock seconds (each seed
thin, the median bold). The last line printed is one JSON object.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from isaac_ppo.tune import Progress

COMMON = ["task=Ant", "sim=mujoco", "diagnostics=off", "eval.interval=250000", "max_iterations=1000000",
          "save_interval=10"]
ARMS = {"isaacgymenvs": [], "cpu": ["profile=cpu"]}
THRESHOLDS = (3000.0, 6000.0)
MARKS_MIN = (2, 10, 25)
STOPPED = 75  # isaac-ppo-train's exit status after a SIGTERM (saved, resumable)


def run_folder(runs_dir: str, arm: str, seed: int) -> Optional[str]:
    found = sorted(glob.glob(os.path.join(runs_dir, f"{arm}_s{seed}", "*", "metrics.jsonl")))
    return os.path.dirname(found[-1]) if found else None


def elapsed_s(rows: List[Dict[str, Any]]) -> float:
    """The training clock with the evaluations' own seconds, as isaac-ppo-tune reads it (tune.Progress)."""
    progress = Progress(float("inf"))
    for row in rows:
        progress.add(row)
    return progress.elapsed


def read_rows(path: str) -> List[Dict[str, Any]]:
    rows = []
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # (a row being written)
                break
    return rows


def train_one(runs_dir: str, arm: str, overrides: List[str], seed: int, cap_s: float,
              stop_at: Optional[float] = None) -> None:
    experiment = f"{arm}_s{seed}"
    folder = run_folder(runs_dir, arm, seed)
    resume = ["resume=auto"] if folder and os.path.isfile(os.path.join(folder, "checkpoints", "last.pt")) else []
    command = ["isaac-ppo-train", *COMMON, *overrides, f"seed={seed}", f"runs_dir={runs_dir}",
               f"experiment={experiment}", *resume]
    print(f"[confirm] {experiment}: {' '.join(command)}", flush=True)
    log = open(os.path.join(runs_dir, f"{experiment}.log"), "a")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    stopped = False
    rows = read_rows(os.path.join(folder, "metrics.jsonl")) if folder else []  # (a resumed run's rows so far)
    progress = Progress(float("inf") if stop_at is None else stop_at)
    for row in rows:
        progress.add(row)
    while process.poll() is None:
        time.sleep(1.0)
        folder = run_folder(runs_dir, arm, seed)
        if folder:
            progress.read(os.path.join(folder, "metrics.jsonl"))  # (only the rows added since the last read)
        if not stopped and (progress.elapsed >= cap_s or progress.solved):
            process.send_signal(signal.SIGTERM)
            stopped = True
    if process.returncode not in (0, STOPPED):
        raise SystemExit(f"[confirm] {experiment}: isaac-ppo-train exited {process.returncode} (log: {log.name})")
    folder = run_folder(runs_dir, arm, seed)
    rows = read_rows(os.path.join(folder, "metrics.jsonl"))
    with open(os.path.join(folder, "confirm_done.json"), "w") as f:
        json.dump({"arm": arm, "seed": seed, "overrides": overrides, "elapsed_s": elapsed_s(rows)}, f)


def bootstrap_median_ci(values: List[float], seed: int = 0, n: int = 10000) -> Tuple[float, float]:
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return medians[int(0.025 * n)], medians[int(0.975 * n) - 1]


def summarise_arm(folders: List[str]) -> Dict[str, Any]:
    runs = [read_rows(os.path.join(folder, "metrics.jsonl")) for folder in folders]
    out: Dict[str, Any] = {"seeds": len(runs)}
    for threshold in THRESHOLDS:
        reached = []
        for rows in runs:
            hit = next((row["eval"] for row in rows if "eval" in row and row["eval"]["return_mean"] >= threshold),
                       None)
            if hit is not None:
                reached.append((hit["wall_s"], hit["env_steps"]))
        key = f"to_{int(threshold)}"
        out[f"{key}_reached"] = f"{len(reached)}/{len(runs)}"
        if len(reached) == len(runs) and reached:
            seconds = [s for s, _ in reached]
            out[f"{key}_median_s"] = round(statistics.median(seconds), 1)
            out[f"{key}_ci_s"] = [round(v, 1) for v in bootstrap_median_ci(seconds)]
            out[f"{key}_median_env_steps"] = statistics.median([e for _, e in reached])
        out[f"{key}_seconds"] = [round(s, 1) for s, _ in reached]
    for minutes in MARKS_MIN:
        values = []
        for rows in runs:
            before = [row["eval"]["return_mean"] for row in rows if "eval" in row and row["eval"]["wall_s"] <= 60 * minutes]
            if before and elapsed_s(rows) >= 60 * minutes - 1:
                values.append(before[-1])
        out[f"eval_at_{minutes}min"] = [round(v) for v in values]
        if values:
            out[f"eval_at_{minutes}min_median"] = round(statistics.median(values))
    totals = {"collect_s": 0.0, "update_s": 0.0, "eval_s": 0.0, "elapsed_s": 0.0, "env_steps": 0}
    for rows in runs:
        totals["collect_s"] += sum(row["collect_s"] for row in rows)
        totals["update_s"] += sum(row["update_s"] for row in rows)
        totals["eval_s"] += sum(row["eval"]["seconds"] for row in rows if "eval" in row)
        totals["elapsed_s"] += elapsed_s(rows)
        totals["env_steps"] += rows[-1]["env_steps"]
    whole = totals["elapsed_s"] or 1.0
    out["time_shares"] = {"collect": round(totals["collect_s"] / whole, 3), "update": round(totals["update_s"] / whole, 3),
                          "evaluation": round(totals["eval_s"] / whole, 3),
                          "rest": round(1 - (totals["collect_s"] + totals["update_s"] + totals["eval_s"]) / whole, 3)}
    out["env_steps_per_s"] = round(totals["env_steps"] / whole)
    return out


def plot(path: str, curves: Dict[str, List[List[Tuple[float, float]]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for (arm, runs), color in zip(sorted(curves.items()), ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        for points in runs:
            axes.plot([s for s, _ in points], [r for _, r in points], color=color, alpha=0.3, linewidth=0.8)
        grid = sorted({s for points in runs for s, _ in points})
        median = []
        for t in grid:
            latest = [[r for s, r in points if s <= t] for points in runs]
            if all(latest):
                median.append((t, statistics.median(values[-1] for values in latest)))
        axes.plot([t for t, _ in median], [r for _, r in median], color=color, linewidth=2.2,
                  label=f"{arm} (median of {len(runs)} seeds)")
    for threshold in THRESHOLDS:
        axes.axhline(threshold, color="grey", linestyle=":", linewidth=0.8)
    axes.set_xscale("log")
    axes.set_xlabel("training wall clock, evaluation included (s, log scale)")
    axes.set_ylabel("evaluation return (mean action, 64 episodes)")
    axes.set_title("Ant on mujoco.batch, 2-core CPU")
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def report(runs_dir: str, out_png: str) -> Dict[str, Any]:
    arms: Dict[str, List[str]] = {}
    for marker in sorted(glob.glob(os.path.join(runs_dir, "*", "*", "confirm_done.json"))):
        with open(marker) as f:
            arms.setdefault(json.load(f)["arm"], []).append(os.path.dirname(marker))
    result = {arm: summarise_arm(folders) for arm, folders in arms.items()}
    curves = {arm: [[(row["eval"]["wall_s"], row["eval"]["return_mean"])
                     for row in read_rows(os.path.join(folder, "metrics.jsonl")) if "eval" in row]
                    for folder in folders] for arm, folders in arms.items()}
    plot(out_png, curves)
    for arm, summary in result.items():
        print(f"{arm}: {json.dumps(summary)}")
    return result


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("run", "report"))
    parser.add_argument("png", nargs="?")
    parser.add_argument("--arm", action="append", default=[], help="NAME=space-separated overrides")
    parser.add_argument("--seeds", default="100,101,102,103,104")
    parser.add_argument("--minutes", type=float, default=25.0)
    parser.add_argument("--runs-dir", default="runs/confirm")
    parser.add_argument("--stop-at-return", type=float, default=None,
                        help="also stop a run at its first evaluation reaching this return (time to solve only)")
    args = parser.parse_args(argv)
    runs_dir = os.path.abspath(args.runs_dir)
    if args.command == "report":
        if not args.png:
            parser.error("report needs OUT.png")
        print(json.dumps(report(runs_dir, args.png)))
        return 0
    arms = {} if args.arm else dict(ARMS)
    for spec in args.arm:
        name, _, words = spec.partition("=")
        arms[name] = words.split()
    os.makedirs(runs_dir, exist_ok=True)
    for seed in (int(s) for s in args.seeds.split(",")):
        for arm, overrides in arms.items():  # arms alternate within a seed: drift in the machine hits both
            folder = run_folder(runs_dir, arm, seed)
            if folder and os.path.isfile(os.path.join(folder, "confirm_done.json")):
                continue
            train_one(runs_dir, arm, overrides, seed, 60.0 * args.minutes, args.stop_at_return)
    return 0


if __name__ == "__main__":
    sys.exit(main())
