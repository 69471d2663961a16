"""Torch's OpenMP threads when a training does not have the cores to itself: the update's time alone and beside a
second training, under libgomp's default wait policy and under OMP_WAIT_POLICY=PASSIVE.

Torch's CPU build runs its intra-op threads on libgomp (torch.__config__.parallel_info()). Between two parallel
regions libgomp's idle threads spin on their core before they sleep: alone on the machine that saves a wake-up;
when another process wants the core, a spinning thread takes its time slice, and the update's many small
operations (each a parallel region and a barrier) wait on threads that are not running. PASSIVE makes an idle
thread sleep at once. Each case runs `isaac-ppo-bench train` (collection alone, the update alone, whole
iterations: its own means) as a subprocess with the policy in its environment; "beside" starts two at once and
reports both. Cases are interleaved in rounds (every policy sees the same machine state); run it alone on the
machine.

  python benchmarks/omp_wait_policy.py [--tasks Cartpole,Ant] [--iterations 5] [--rounds 2] [--num-envs N]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List

# libgomp's default (OMP_WAIT_POLICY unset) spins GOMP_SPINCOUNT=300000 times before it sleeps; the package's
# entry points set PASSIVE only where neither variable is set (isaac_ppo/preload.py), so the spin count names the
# default here
POLICIES = {"libgomp's default (spin, then sleep)": {"GOMP_SPINCOUNT": "300000"},
            "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"}}


def bench(task: str, iterations: int, num_envs: int, policy: Dict[str, str], copies: int) -> List[Dict]:
    """`copies` isaac-ppo-bench train processes started together; each one's JSON."""
    from isaac_ppo.preload import WAIT_VARIABLES

    env = {k: v for k, v in os.environ.items() if k not in WAIT_VARIABLES}
    env.update(policy)
    argv = [sys.executable, "-m", "isaac_ppo.lab.bench", "train", f"task={task}", f"iterations={iterations}",
            "diagnostics=off", "eval.interval_env_steps=0", "eval.final=false"]
    if num_envs:
        argv.append(f"num_envs={num_envs}")
    children = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                for _ in range(copies)]
    results = []
    for child in children:
        out, err = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({policy}): {err.strip().splitlines()[-1:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="Cartpole,Ant")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--num-envs", type=int, default=0, help="0: the task's default")
    args = parser.parse_args()
    from isaac_ppo.lab.report.clock import machine

    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    rows: Dict[tuple, List[Dict]] = {}
    for _ in range(args.rounds):
        for task in args.tasks.split(","):
            for name, policy in POLICIES.items():
                for copies, where in ((1, "alone"), (2, "beside a second")):
                    rows.setdefault((task, name, where), []).extend(
                        bench(task, args.iterations, args.num_envs, policy, copies))
    table = []
    print("| task | policy | training | update, s | collection, s | iteration, s | env steps/s |")
    print("|---|---|---|---|---|---|---|")
    for (task, name, where), runs in rows.items():
        median = {k: statistics.median(r[k] for r in runs) for k in ("update_s", "collect_s", "iteration_s",
                                                                     "env_steps_per_s")}
        table.append({"task": task, "policy": name, "where": where, "runs": len(runs),
                      "num_envs": runs[0]["num_envs"], "torch_threads": runs[0]["torch_threads"], **median})
        print(f"| {task} ({runs[0]['num_envs']} envs) | {name} | {where} | {median['update_s']:.3f} | "
              f"{median['collect_s']:.3f} | {median['iteration_s']:.3f} | {median['env_steps_per_s']:.0f} |")
    print(json.dumps({"started_utc": started, "machine": machine(), "iterations": args.iterations,
                      "rounds": args.rounds, "medians": table}))


if __name__ == "__main__":
    main()
