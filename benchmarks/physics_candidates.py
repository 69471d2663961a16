"""Which physics for a MuJoCo locomotion port: candidates (integrator, physics step, substeps a 1/60 s control step)
measured side by side in one run, for cost and for soundness (issue 44).

    python benchmarks/physics_candidates.py cost [--task Ant] [--rounds 2] [--only NAME ...]
    python benchmarks/physics_candidates.py diverge [--task Ant] [--envs 1024] [--steps 1000]
    python benchmarks/physics_candidates.py exploits [--envs 16] [--steps 300]
    python benchmarks/physics_candidates.py gait CANDIDATE CHECKPOINT ... [--task Ant] [--envs 16] [--steps 300]

- cost: per candidate, alternated over rounds in one process tree: env steps/s through the VecEnv contract and of
  the bare simulator (mujoco.batch, 512 envs, random actions, collection's threads), then a training iteration
  (`isaac-ppo-bench train`, a fresh process each) at profile=cpu (512 x 16) and at IsaacGymEnvs' size (4096 x 16).
- diverge: simulations that diverged (the task's bounds, MuJoCo's warnings) per million env steps under uniform
  random actions and under bang-bang actions (the sign of a normal: every motor at full effort, the hardest case).
- exploits: the two exploit checkpoints of tests/data/ant_policies (an implicit-trained exploit, an RK4-trained
  walker) replayed under each candidate: an exploit that still pays under a candidate is a candidate to refuse.
- gait: checkpoints trained under CANDIDATE replayed under it at 1x, 2x and 4x finer steps (the same 1/60 s control
  step): an exploit of integration error slows as the steps shrink, a gait holds.
Each result is one JSON line on stdout (append them to benchmarks/logs/).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

# name -> task.mujoco overrides; every one steps the same 1/60 s control step (timestep x substeps)
CANDIDATES: Dict[str, Dict[str, Any]] = {
    "rk4_120x2": {"integrator": "rk4", "timestep": 1 / 120, "substeps": 2},  # the port until issue 44
    "rk4_60x1": {"integrator": "rk4", "timestep": 1 / 60, "substeps": 1},
    # the same at 1x (MuJoCo's refsafe raises the floor's 0.02 s time constant to 2 x 1/60 s), but declared, so
    # that the gait check's finer replays keep that floor instead of going back to 0.02 s
    "rk4_60x1_tc30": {"integrator": "rk4", "timestep": 1 / 60, "substeps": 1, "contact_timeconst": 1 / 30},
    # the 1/60 s step with the 0.02 s floor of the finer steps: MuJoCo's refsafe rule off (task.mujoco.refsafe)
    "rk4_60x1_norefsafe": {"integrator": "rk4", "timestep": 1 / 60, "substeps": 1, "contact_timeconst": 0.02,
                           "refsafe": False},
    "implicit_240x4": {"integrator": "implicit", "timestep": 1 / 240, "substeps": 4},
    "euler_240x4": {"integrator": "euler", "timestep": 1 / 240, "substeps": 4},
    "implicitfast_120x2": {"integrator": "implicitfast", "timestep": 1 / 120, "substeps": 2},
    "euler_120x2": {"integrator": "euler", "timestep": 1 / 120, "substeps": 2},  # the exploited port, for scale
    # the port as issue 21 found it exploited: Euler at 2 x 1/120 s on the model file's 0.02 s floor
    "euler_120x2_tc20": {"integrator": "euler", "timestep": 1 / 120, "substeps": 2, "contact_timeconst": 0.02},
}
HERE = os.path.dirname(os.path.abspath(__file__))
EXPLOITS = [os.path.join(HERE, "..", "tests", "data", "ant_policies", name)
            for name in ("implicit_adaptive_256x256_seed_0.pt", "rk4_adaptive_256x256_seed_0.pt")]


def machine() -> Dict[str, Any]:
    from isaac_ppo.lab.report.clock import machine as what_ran

    return {**what_ran(), "date": time.strftime("%Y-%m-%d %H:%M")}


def overrides(candidate: str) -> List[str]:
    return [f"task.mujoco.{key}={value}" for key, value in CANDIDATES[candidate].items()]


def sim_rate(task: str, candidate: str, envs: int = 512, steps: int = 300) -> Dict[str, Any]:
    """Env steps/s through the contract and of the bare mujoco.batch (isaac-ppo-bench sim's measurement: the same
    states and random actions, interleaved blocks, collection's threads)."""
    from isaac_ppo.lab.bench_sim import SIM_DEFAULTS, bench_sim

    result = bench_sim({**SIM_DEFAULTS, "task": task, "num_envs": envs, "steps": steps, "sim": "mujoco",
                        "mujoco": dict(CANDIDATES[candidate])})
    return {key: result[key] for key in ("env_steps_per_s", "raw_steps_per_s")}


def train_iteration(candidate: str, size: List[str], iterations: int) -> Dict[str, Any]:
    command = ["isaac-ppo-bench", "train", "task=Ant", "diagnostics=off", f"iterations={iterations}",
               *size, *overrides(candidate)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    return {key: row[key] for key in ("num_envs", "rollout_length", "collect_s", "update_s", "iteration_s")}


def cost(args: argparse.Namespace) -> None:
    names = args.only or list(CANDIDATES)
    for round_ in range(args.rounds):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            row = {"bench": "physics_cost", "task": args.task, "candidate": name, "round": round_,
                   **CANDIDATES[name], **sim_rate(args.task, name)}
            row["train_cpu_profile"] = train_iteration(name, ["profile=cpu"], 20)
            row["train_isaacgymenvs_size"] = train_iteration(name, [], 4)
            print(json.dumps({**row, **machine()}), flush=True)


def diverge(args: argparse.Namespace) -> None:
    import torch

    from isaac_ppo.envs import make

    torch.set_num_threads(1)
    for name in args.only or list(CANDIDATES):
        for kind in ("random", "bang_bang"):
            env = make(args.task, args.envs, sim="mujoco", seed=1, mujoco=dict(CANDIDATES[name]))
            generator = torch.Generator().manual_seed(1)
            env.reset()
            diverged = 0
            for _ in range(args.steps):
                if kind == "random":
                    action = torch.rand(args.envs, env.num_actions, generator=generator) * 2 - 1
                else:
                    action = torch.randn(args.envs, env.num_actions, generator=generator).sign()
                _, _, _, extras = env.step(action)
                diverged += int(extras.get("diverged", 0))
            env_steps = args.envs * args.steps
            print(json.dumps({"bench": "physics_diverge", "task": args.task, "candidate": name, "actions": kind,
                              "env_steps": env_steps, "diverged": diverged,
                              "per_million_env_steps": round(1e6 * diverged / env_steps, 2), **machine()}),
                  flush=True)


def exploits(args: argparse.Namespace) -> None:
    from isaac_ppo.lab.gait import check

    for path in EXPLOITS:
        for name in args.only or list(CANDIDATES):
            result = check(path, "Ant", args.envs, args.steps, physics=dict(CANDIDATES[name]))
            print(json.dumps({"bench": "physics_exploit", "candidate": name, **result,
                              "checkpoint": os.path.basename(path)}), flush=True)


def gait(args: argparse.Namespace) -> None:
    from isaac_ppo.lab.gait import check

    for path in args.checkpoints:
        for refine in (1, 2, 4):
            result = check(path, args.task, args.envs, args.steps, refine=refine,
                           physics=dict(CANDIDATES[args.candidate]))
            print(json.dumps({"bench": "physics_gait", "candidate": args.candidate, "refine": refine, **result}),
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn in (("cost", cost), ("diverge", diverge), ("exploits", exploits), ("gait", gait)):
        p = sub.add_parser(name)
        p.set_defaults(fn=fn)
        p.add_argument("--task", default="Ant")
        p.add_argument("--only", nargs="*", choices=list(CANDIDATES))
        p.add_argument("--envs", type=int, default=1024 if name == "diverge" else 16)
        p.add_argument("--steps", type=int, default=1000 if name == "diverge" else 300)
        p.add_argument("--rounds", type=int, default=2)
        if name == "gait":
            p.add_argument("candidate", choices=list(CANDIDATES))
            p.add_argument("checkpoints", nargs="+")
    args = parser.parse_args()
    args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
