"""The training return against the evaluation, on one run: how far the training curve lags the policy, and what
the evaluation costs.

    python benchmarks/eval_lag.py OUT.png [RUN_DIR]

Without RUN_DIR it first trains the issue's run (Ant, 4096 envs, 200 iterations, seed 0) with an evaluation every
10 iterations (eval.interval_env_steps=655360, denser than the default 2,000,000 so that the curve has 20 points) and
eval.stochastic=true, and uses that run. Then, from its metrics.jsonl and metrics.json:

- one PNG: the training window's return (window_mean_return, the last 100 finished episodes), the batch's
  (batch_mean_return), and the evaluations (the mean action, and the sampled actions as training plays them:
  the IQM of their episodes with its 95% bootstrap CI band) against env steps;
- the lag: for each evaluation of the sampled actions at env steps s (the same kind of policy training plays,
  so the levels are comparable), the env steps at which the training window first reaches that value; the lag
  is the difference, reported per point and as the median over the evaluations the window did reach;
- the evaluation's cost: its seconds (each evaluation times itself) over the run's wall time, as measured in
  this run, and as it would be at the default interval (the same mean seconds per evaluation, one evaluation
  per 2,000,000 env steps, deterministic only: half the measured seconds).

The last line printed is one JSON object (for benchmarks/RESULTS.md).
"""
from __future__ import annotations

import glob
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

RUN = ["task=Ant", "sim=mujoco", "num_envs=4096", "seed=0", "max_iterations=200", "eval.interval_env_steps=655360",
       "eval.stochastic=true", "experiment=eval_lag"]
DEFAULT_INTERVAL = 2_000_000


def train(runs_dir: str) -> str:
    started = time.time()
    subprocess.run(["isaac-ppo-train", *RUN, f"runs_dir={runs_dir}"], check=True)
    print(f"trained in {time.time() - started:.0f} s", flush=True)
    return sorted(glob.glob(os.path.join(runs_dir, "eval_lag", "*")))[-1]


def first_reaching(rows: List[Dict[str, Any]], value: float, after: int) -> Optional[int]:
    """The env steps of the first row at or after `after` whose training window is at least `value`."""
    for row in rows:
        window = row.get("window_mean_return")
        if row["env_steps"] >= after and window is not None and window >= value:
            return row["env_steps"]
    return None


def measure(run_dir: str) -> Dict[str, Any]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(run_dir, "metrics.json")) as f:
        summary = json.load(f)
    evaluations = [row["eval"] for row in rows if "eval" in row]
    lags = []
    for evaluation in evaluations:
        sampled = evaluation.get("stochastic", evaluation)["return_mean"]
        reached = first_reaching(rows, sampled, evaluation["env_steps"])
        lags.append({"env_steps": evaluation["env_steps"], "eval_sampled": round(sampled, 2),
                     "eval_mean_action": round(evaluation["return_mean"], 2),
                     "window_then": next(r["window_mean_return"] for r in rows
                                         if r["env_steps"] == evaluation["env_steps"]),
                     "window_reaches_it_at": reached,
                     "lag_env_steps": None if reached is None else reached - evaluation["env_steps"]})
    reached = [lag["lag_env_steps"] for lag in lags if lag["lag_env_steps"] is not None]
    batch = rows[0]["batch_size"]
    eval_s = [e["seconds"] for e in evaluations]
    final_s = (summary.get("final_eval") or {}).get("seconds", 0.0)
    wall = summary["wall_s"] + sum(eval_s) + final_s  # (the run's wall_s leaves the evaluations out)
    per_eval = statistics.mean(eval_s) if eval_s else 0.0
    stochastic = any("stochastic" in e for e in evaluations)
    default_evals = summary["env_steps"] // DEFAULT_INTERVAL
    default_cost = default_evals * per_eval / (2 if stochastic else 1)
    return {
        "bench": "eval_lag", "run_dir": run_dir, "iterations": summary["iterations"],
        "env_steps": summary["env_steps"], "batch_size": batch, "training_wall_s": summary["wall_s"],
        "evaluations": len(evaluations), "eval_seconds_mean": round(per_eval, 2),
        "eval_cost_fraction_measured": round((sum(eval_s) + final_s) / wall, 4),
        "eval_cost_fraction_default_interval": round(default_cost / (summary["wall_s"] + default_cost), 4),
        "lag_env_steps_median": statistics.median(reached) if reached else None,
        "lag_iterations_median": round(statistics.median(reached) / batch, 1) if reached else None,
        "lag_points_reached": f"{len(reached)} of {len(lags)}", "lags": lags,
        "final_eval": summary.get("final_eval"), "final_window_mean_return": summary.get("final_window_mean_return"),
    }


def plot(out: str, run_dir: str, result: Dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    fig, ax = plt.subplots(figsize=(8, 4.6))
    steps = [r["env_steps"] for r in rows]
    ax.plot(steps, [r["window_mean_return"] if r["window_mean_return"] is not None else float("nan") for r in rows],
            color="tab:blue", lw=1.6, label="training: last 100 finished episodes (window_mean_return)")
    ax.plot(steps, [r["batch_mean_return"] if r["batch_mean_return"] is not None else float("nan") for r in rows],
            color="tab:blue", lw=0.6, alpha=0.4, label="training: episodes ended in the iteration (batch_mean_return)")
    evaluated = [r for r in rows if "eval" in r]
    for key, color, label in ((None, "black", "evaluation: mean action (IQM, 95% CI)"),
                              ("stochastic", "tab:orange", "evaluation: sampled actions (IQM, 95% CI)")):
        points = [(r["env_steps"], r["eval"][key] if key else r["eval"]) for r in evaluated
                  if key is None or key in r["eval"]]
        if not points:
            continue
        xs = [p[0] for p in points]
        ax.plot(xs, [p[1]["return_iqm"] for p in points], "o-", color=color, ms=3, lw=1.2, label=label)
        ax.fill_between(xs, [p[1]["return_ci95"][0] for p in points], [p[1]["return_ci95"][1] for p in points],
                        color=color, alpha=0.15)
    lag = result["lag_iterations_median"]
    with open(os.path.join(run_dir, "metrics.json")) as f:
        task = json.load(f)["task"]
    ax.set_title(f"{task}, {rows[0]['num_envs']} envs x {rows[0]['rollout_length']} steps: the training window "
                 f"lags the policy by {lag} iterations (median)" if lag is not None else f"{task}: training vs evaluation",
                 fontsize=9)
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: List[str]) -> None:
    out = argv[0]
    run_dir = argv[1] if len(argv) > 1 else train("/tmp/isaac-ppo-eval-lag")
    result = measure(run_dir)
    plot(out, run_dir, result)
    for lag in result["lags"]:
        print(json.dumps(lag))
    print(json.dumps({k: v for k, v in result.items() if k != "lags"}))


if __name__ == "__main__":
    main(sys.argv[1:])
