"""Learning curves from run directories: the training window's return (window_mean_return: the last 100 finished
episodes, lagged) against iteration, one line per run and their mean.

    python benchmarks/plot_curves.py OUT.png RUN_DIR [RUN_DIR ...]   (needs matplotlib)

Prints, per run, the mean return at the last iteration and the best, and the same for the mean curve. A run and its
resumes (each resume writes a folder of its own: pass them all, e.g. runs/learning/exp_seed*/*/) are one curve.

With --eval, the periodic evaluations instead (the rows' eval: each env's first episode from reset, unbiased, on
fresh draws of the task's reset, commands included): the evaluation return and each measure the task reports beside
it (Anymal: eval.tracking_error_xy_mps, m/s), one row of panels each, against env steps and against the wall clock
(eval.wall_s: training plus every evaluation so far), one line per run; then each task_state the training rows carry
(AnymalTerrain: the curriculum's mean terrain level, every iteration):

    python benchmarks/plot_curves.py --eval OUT.png RUN_DIR [RUN_DIR ...]
"""
from __future__ import annotations

import json
import os
import sys

from isaac_ppo.lab.report.runs import join_resumed, load_run


def load(run_dirs: list) -> tuple:
    """One run per resume chain (a run continued with resume= writes a folder of its own; the report's join follows
    config.yaml's `resume`): (labels, rows per run), labelled by the experiment (the folder above the run's)."""
    runs = join_resumed([load_run(d.rstrip("/")) for d in run_dirs])
    return [os.path.basename(os.path.dirname(os.path.abspath(run.path))) for run in runs], [run.rows for run in runs]


def main(out: str, run_dirs: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, runs = load(run_dirs)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    curves = []
    for label, rows in zip(labels, runs):
        xs = [r["iteration"] + 1 for r in rows]
        ys = [r["window_mean_return"] if r["window_mean_return"] is not None else float("nan") for r in rows]
        curves.append(ys)
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


# what the evaluation rows carry besides the measures a task adds (isaac_ppo/loop/evaluate.py)
EVAL_BOOKKEEPING = ("episodes", "diverged", "return_iqm", "return_ci95", "length_mean", "env_steps", "policy_version",
                    "seconds", "wall_s", "stochastic")


def main_eval(out: str, run_dirs: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, runs = load(run_dirs)
    evaluations = [[r["eval"] for r in rows if "eval" in r] for rows in runs]
    measured = [k for k in evaluations[0][0] if k not in EVAL_BOOKKEEPING] if evaluations[0] else ["return_mean"]
    # the training envs' task state (AnymalTerrain: the curriculum's mean terrain level), every iteration: a row of
    # panels each, after the evaluation's
    states = sorted(runs[0][-1].get("task_state") or {}) if runs[0] else []
    panels = [f"eval.{k}" for k in measured] + [f"task_state.{k}" for k in states]
    fig, axes = plt.subplots(len(panels), 2, figsize=(11, 3.6 * len(panels)), squeeze=False)
    for label, rows, training in zip(labels, evaluations, runs):
        for row_axes, key in zip(axes, measured):
            ys = [r[key] for r in rows]
            row_axes[0].plot([r["env_steps"] for r in rows], ys, lw=1, marker=".", label=label)
            row_axes[1].plot([r["wall_s"] / 60 for r in rows], ys, lw=1, marker=".", label=label)
        for row_axes, key in zip(axes[len(measured):], states):
            kept = [r for r in training if key in (r.get("task_state") or {})]
            ys = [r["task_state"][key] for r in kept]
            row_axes[0].plot([r["env_steps"] for r in kept], ys, lw=1, label=label)
            row_axes[1].plot([r["wall_s"] / 60 for r in kept], ys, lw=1, label=label)
        last = rows[-1] if rows else {}
        state = (training[-1].get("task_state") or {}) if training else {}
        print(f"{label}: " + ", ".join(f"{k} {last.get(k, float('nan')):.3f}" for k in measured) +
              f" at {last.get('env_steps', 0):,} env steps, {last.get('wall_s', 0) / 60:.1f} min" +
              "".join(f"; task_state.{k} {state[k]:.3f} at {training[-1]['env_steps']:,}" for k in states
                      if k in state))
    for row_axes, key in zip(axes, panels):
        row_axes[0].set_xlabel("env steps")
        row_axes[1].set_xlabel("wall clock, minutes (training + evaluations)")
        for ax in row_axes:
            ax.set_ylabel(key)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    if sys.argv[1] == "--eval":
        main_eval(sys.argv[2], sys.argv[3:])
    else:
        main(sys.argv[1], sys.argv[2:])
