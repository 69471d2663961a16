"""Learning curves from run directories: the training window's return (window_mean_return: the last 100 finished
episodes, lagged) against iteration, one line per run and their mean.

    python benchmarks/plot_curves.py OUT.png RUN_DIR [RUN_DIR ...]   (needs matplotlib)

Prints, per run, the mean return at the last iteration and the best, and the same for the mean curve.
"""
from __future__ import annotations

import json
import os
import sys


def load(run_dir: str) -> list:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def main(out: str, run_dirs: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [load(d) for d in run_dirs]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    curves = []
    for run_dir, rows in zip(run_dirs, runs):
        xs = [r["iteration"] + 1 for r in rows]
        ys = [r["window_mean_return"] if r["window_mean_return"] is not None else float("nan") for r in rows]
        curves.append(ys)
        label = os.path.basename(os.path.dirname(run_dir.rstrip("/"))) or run_dir
        ax.plot(xs, ys, lw=1, alpha=0.6, label=label)
        print(f"{label}: final {ys[-1]:.1f}, best {max(y for y in ys if y == y):.1f}, "
              f"{rows[-1]['env_steps']:,} env steps, {rows[-1]['wall_s']:.0f} s")
    length = min(len(c) for c in curves)
    mean = [sum(c[i] for c in curves) / len(curves) for i in range(length)]
    ax.plot(range(1, length + 1), mean, color="black", lw=2, label=f"mean of {len(curves)}")
    print(f"mean: final {mean[-1]:.1f}, best {max(y for y in mean if y == y):.1f}")
    summary = os.path.join(run_dirs[0], "metrics.json")
    task = json.load(open(summary)).get("task", "") if os.path.isfile(summary) else ""
    first = runs[0][0]
    ax.set_xlabel(f"iteration ({first['num_envs']} envs x {first['rollout_length']} steps)")
    ax.set_ylabel("mean episode return")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(f"isaac-ppo on the MuJoCo port {task}".strip())
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
