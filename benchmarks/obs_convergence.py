"""Does a task's observation converge as the physics step shrinks? The same open-loop actions (uniform random, one
seeded sequence) on the same reset states, replayed at physics steps that halve each time (the control step kept),
and the mean |observation| of each chosen column over every env and step. A column that keeps moving as the step
halves carries integration error into what the policy sees: a policy can learn it, and the gait check then finds
the policy fails at finer steps (BallBalance's tray sensors under implicitfast: benchmarks/history/ballbalance.md,
"Why BallBalance fails the gait check").

  python benchmarks/obs_convergence.py BallBalance --columns 12:24 --timestep 0.00125 --substeps 8 --halvings 3 \
      [--integrator euler] [--envs 16] [--steps 200]

One JSON line per step size: the physics, and the mean |obs| of each column.
"""
from __future__ import annotations

import argparse
import json

import torch

from isaac_ppo.envs import make
from isaac_ppo.tasks.base import INTEGRATORS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task")
    parser.add_argument("--columns", default=None, help="START:STOP of the observation (default: all)")
    parser.add_argument("--timestep", type=float, required=True, help="the coarsest physics step, s")
    parser.add_argument("--substeps", type=int, required=True, help="its physics steps a control step")
    parser.add_argument("--halvings", type=int, default=3)
    parser.add_argument("--integrator", choices=INTEGRATORS, default=None, help="default: the task's")
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    start, stop = (int(v) for v in args.columns.split(":")) if args.columns else (0, None)
    for halving in range(args.halvings + 1):
        physics = {"timestep": args.timestep / 2 ** halving, "substeps": args.substeps * 2 ** halving}
        if args.integrator:
            physics["integrator"] = args.integrator
        env = make(args.task, args.envs, sim="mujoco", seed=args.seed, mujoco=physics)
        generator = torch.Generator().manual_seed(0)  # the same actions at every step size
        env.reset()
        total = None
        for _ in range(args.steps):
            actions = torch.rand(args.envs, env.num_actions, generator=generator) * 2 - 1
            obs = env.step(actions)[0]["obs"][:, start:stop].abs().float()
            total = obs.sum(0) if total is None else total + obs.sum(0)
        mean = (total / (args.envs * args.steps)).tolist()
        print(json.dumps({"task": args.task, **physics, "columns": args.columns or "all", "envs": args.envs,
                          "steps": args.steps, "mean_abs_obs": [round(v, 3) for v in mean]}), flush=True)


if __name__ == "__main__":
    main()
