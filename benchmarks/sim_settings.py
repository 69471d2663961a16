"""What the simulator allows at a task's physics: the bare mujoco.batch step's rate under MuJoCo's own settings
(solver tolerance and iterations, island discovery, threads), measured side by side in one run (issue 44 deliver 4).

    python benchmarks/sim_settings.py [--task Ant] [--envs 512] [--steps 200] [--rounds 3]

Each variant is a bare mujoco.batch.Batch of the task's model as the task builds it (its task.mujoco config
applied: integrator, step, contact time constant), with one of MuJoCo's settings changed. All variants step the
same states (the env's after a warm-up of random actions) with the same random controls, alternated over rounds
so that a drift of the machine falls on all of them. Besides env steps/s, the mean solver iterations a physics
step took (MjData.solver_niter): a tolerance that the solver meets in one or two Newton iterations cannot be
where the time goes. Variants that change the physics (tolerance, iterations) are marked: a faster one would
need the soundness checks again. Each result is one JSON line on stdout (append them to benchmarks/logs/).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Tuple

import mujoco
import numpy as np
import torch

from isaac_ppo.envs import make


def _island_off(model: Any) -> None:
    model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ISLAND)


def _setter(field: str, value: Any) -> Callable[[Any], None]:
    return lambda model: setattr(model.opt, field, value)


# name -> (what it does to the model, whether it changes the physics, threads: None = the task's)
VARIANTS: Dict[str, Tuple[Callable[[Any], None], bool, Any]] = {
    "as_configured": (lambda model: None, False, None),
    "one_thread": (lambda model: None, False, 1),
    "island_off": (_island_off, False, None),
    "tolerance_1e-8": (_setter("tolerance", 1e-8), True, None),  # MuJoCo's default
    "tolerance_1e-6": (_setter("tolerance", 1e-6), True, None),
    "iterations_4": (_setter("iterations", 4), True, None),
}


def measure(task: str, envs: int, steps: int, rounds: int) -> List[Dict[str, Any]]:
    from mujoco.batch import Batch

    torch.set_num_threads(1)
    env = make(task, envs, sim="mujoco", seed=0)
    generator = torch.Generator().manual_seed(0)
    env.reset()
    for _ in range(100):  # states of a running episode, not of the reset pose
        env.step(torch.rand(envs, env.num_actions, generator=generator) * 2 - 1)
    start = env.sim.batch.state.copy()
    controls = [(torch.rand(envs, env.num_actions, generator=generator) * 2 - 1).numpy() * env.power_scale
                for _ in range(steps)]
    threads = env.sim.batch.nthread
    batches = {}
    for name, (change, _, nthread) in VARIANTS.items():
        model = mujoco.MjModel.from_xml_path(env.asset_path())
        model.opt.timestep = env.model.opt.timestep
        model.opt.integrator = env.model.opt.integrator
        model.opt.disableflags = env.model.opt.disableflags
        model.geom_solref[:] = env.model.geom_solref
        env.configure_model(model)
        change(model)
        batch = Batch(model, envs, nthread or threads)
        batches[name] = (batch, batch.bind("ctrl"), batch.bind("solver_niter"))
    seconds: Dict[str, List[float]] = {name: [] for name in VARIANTS}
    niter: Dict[str, List[float]] = {name: [] for name in VARIANTS}
    for round_ in range(rounds):
        names = list(VARIANTS) if round_ % 2 == 0 else list(VARIANTS)[::-1]
        for name in names:
            batch, ctrl, solver_niter = batches[name]
            batch.state[:] = start
            iterations = 0.0
            t0 = time.perf_counter()
            for control in controls:
                ctrl[:] = control
                batch.step(None, env.substeps)
                iterations += float(solver_niter[:, 0].mean())  # (the last substep's first island)
            seconds[name].append(time.perf_counter() - t0)
            niter[name].append(iterations / steps)
    rows = []
    for name, (_, changes_physics, nthread) in VARIANTS.items():
        best = statistics.median(seconds[name])
        rows.append({"bench": "sim_settings", "task": task, "variant": name, "changes_physics": changes_physics,
                     "nthread": nthread or threads, "envs": envs, "steps": steps, "rounds": rounds,
                     "env_steps_per_s": round(envs * steps / best), "solver_iterations_mean":
                     round(statistics.mean(niter[name]), 2), "timestep": float(env.model.opt.timestep),
                     "substeps": env.substeps})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="Ant")
    parser.add_argument("--envs", type=int, default=512)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from isaac_ppo.lab.report.clock import machine

    stamp = {**machine(), "date": time.strftime("%Y-%m-%d %H:%M")}
    base = None
    for row in measure(args.task, args.envs, args.steps, args.rounds):
        base = base or row["env_steps_per_s"]
        row["ratio_to_as_configured"] = round(row["env_steps_per_s"] / base, 3)
        print(json.dumps({**row, **stamp}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
