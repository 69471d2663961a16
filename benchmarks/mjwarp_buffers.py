"""How many contacts and constraint rows a world of each task needs: the measurement behind the MuJoCo Warp buffer
sizes in cfg/task/*.yaml (mujoco.nconmax, mujoco.njmax).

MuJoCo Warp allocates contacts in one pool of num_envs x nconmax (a world may use more than its share while the
pool lasts) and constraint rows strictly per world (njmax); a world past either is flagged (d.overflow) and the
env resets it as diverged. The counts come from the same models on mujoco.batch (the same collision and
constraint rules; MuJoCo Warp is the float32 port), read after every physics substep (before the env resets the worlds that ended) over whole episodes of three
kinds of actions: uniform random, bang-bang (+-1, the violent end), and, given a checkpoint of the task, the
trained policy's mean action (a walking robot: feet strike, then lift).

  python benchmarks/mjwarp_buffers.py [--envs 256] [--steps 1000] [--tasks A,B] [--checkpoint TASK=PATH ...]
"""
from __future__ import annotations

import argparse
import json

import torch

from isaac_ppo.envs import make


def policy_from(path: str):
    from isaac_ppo.export import build_policy  # (the checkpoint's mean action, its normaliser folded in)

    return build_policy(path)[0]


def measure(task: str, envs: int, steps: int, actions: str, policy=None) -> dict:
    env = make(task, envs, sim="mujoco", seed=11)
    ncon = env.sim.batch.bind("ncon")
    nefc = env.sim.batch.bind("nefc")
    generator = torch.Generator().manual_seed(0)
    obs = env.reset()["obs"]
    most_contacts = most_rows = pool = 0
    per_world = []
    physics_step = env.sim.step

    def step_and_count(n: int, substeps: int) -> None:
        # counted right after the physics, before the env resets the worlds that ended (a fall's terminal
        # state has the most contacts of its episode; a reset's forward() would overwrite its counts)
        nonlocal most_contacts, most_rows, pool
        for _ in range(substeps):
            physics_step(n, 1)
            most_contacts = max(most_contacts, int(ncon.max()))
            most_rows = max(most_rows, int(nefc.max()))
            pool = max(pool, int(ncon.sum()))
        per_world.append(float(ncon.mean()))

    env.sim.step = step_and_count
    for _ in range(steps):
        if policy is not None:
            with torch.no_grad():
                act = policy(obs)
        elif actions == "random":
            act = torch.rand(envs, env.num_actions, generator=generator) * 2 - 1
        else:
            act = torch.randint(0, 2, (envs, env.num_actions), generator=generator).float() * 2 - 1
        obs = env.step(act)[0]["obs"]
    return {"task": task, "actions": actions, "envs": envs, "steps": steps, "max_contacts_per_world": most_contacts,
            "max_pool_contacts_per_world": round(pool / envs, 2), "mean_contacts_per_world": round(sum(per_world) / len(per_world), 2),
            "max_constraint_rows_per_world": most_rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--checkpoint", action="append", default=[], help="TASK=PATH of a trained policy")
    parser.add_argument("--tasks", default="Cartpole,Ant,Humanoid,Anymal,BallBalance", help="comma-separated")
    args = parser.parse_args()
    torch.set_num_threads(1)
    checkpoints = dict(item.split("=", 1) for item in args.checkpoint)
    for task in args.tasks.split(","):
        for actions in ("random", "bang-bang"):
            print(json.dumps(measure(task, args.envs, args.steps, actions)), flush=True)
        if task in checkpoints:
            print(json.dumps(measure(task, args.envs, args.steps, "policy", policy_from(checkpoints[task]))), flush=True)


if __name__ == "__main__":
    main()
