"""Quadcopter's physics step by measurement (issue 87; benchmarks/history/quadcopter.md): the cost of each candidate
(integrator, physics step x substeps of the 10 ms control step) through `isaac-ppo-bench sim`'s bench_sim, the
candidates alternated over rounds in one process; uniform random actions, so the figure also counts the simulations
that diverged under them.

    python benchmarks/quadcopter_physics.py [--envs 8192] [--steps 100] [--rounds 2]

A candidate that is cheaper is then trained and its policy replayed at finer steps (the gait check):

    isaac-ppo-train task=Quadcopter task.mujoco.timestep=0.01 task.mujoco.substeps=1 max_iterations=100 ...
    python benchmarks/gait_check.py RUN/checkpoints/last.pt --task Quadcopter --refine K
"""
from __future__ import annotations

import argparse
import json
import statistics
from typing import Any, Dict, List

from isaac_ppo.lab.bench_sim import SIM_DEFAULTS, bench_sim

# name -> task.mujoco overrides; each steps the same 10 ms control step (timestep x substeps)
CANDIDATES: Dict[str, Dict[str, Any]] = {
    "implicitfast_5ms_x2": {"integrator": "implicitfast", "timestep": 0.005, "substeps": 2},  # the port's
    "implicitfast_10ms_x1": {"integrator": "implicitfast", "timestep": 0.01, "substeps": 1},
    "euler_10ms_x1": {"integrator": "euler", "timestep": 0.01, "substeps": 1},
    "euler_5ms_x2": {"integrator": "euler", "timestep": 0.005, "substeps": 2},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rates: Dict[str, List[float]] = {name: [] for name in CANDIDATES}
    for round_ in range(args.rounds):
        for name, physics in CANDIDATES.items():
            result = bench_sim(dict(SIM_DEFAULTS, task="Quadcopter", sim="mujoco", num_envs=args.envs,
                                    steps=args.steps, mujoco=physics, raw=False))
            rates[name].append(result["env_steps_per_s"])
            print(json.dumps({"round": round_, "candidate": name, **result}), flush=True)
    base = statistics.median(rates["implicitfast_5ms_x2"])
    for name, values in rates.items():
        print(json.dumps({"candidate": name, "median_env_steps_per_s": statistics.median(values),
                          "against_the_port": round(statistics.median(values) / base, 3)}), flush=True)


if __name__ == "__main__":
    main()
