"""Is a trained Ant walking, or exploiting the simulator? Replays checkpoints' deterministic policies and measures the
torso's speed (the observation's local linear velocity, the quantity Ant's progress reward pays for per step).

A walking Ant of this port moves at ~7 m/s (its reward ~8 a step); a policy far above that is exploiting contact
physics, not walking, and its return measures the exploit. Found in issue 21's study (adaptive_256x256 seed 0).

  python benchmarks/gait_check.py runs/study/paper_ant/runs/*/seed_*/checkpoints/last.pt [--envs 64] [--steps 1000]

One JSON line per checkpoint: torso speed quantiles (50/90/99%) and max over every env and step, median reward a
step, and the simulations that diverged (stopped by the task's bounds) during the replay.
"""
from __future__ import annotations

import argparse
import json

import torch

from isaac_ppo.build import build_model
from isaac_ppo.envs.make import make
from isaac_ppo.evaluate import mean_action
from isaac_ppo.io import checkpoint
from isaac_ppo.train import compose_config

TORSO_VELOCITY = slice(1, 4)  # Ant's observation: torso height, then its local linear velocity (IsaacGymEnvs' order)


def check(path: str, envs: int, steps: int, seed: int) -> dict:
    cfg = compose_config(["task=Ant", "sim=mujoco", "test=true", f"checkpoint={path}"])
    env = make("Ant", envs, sim="mujoco", seed=seed)
    model = build_model(cfg, env, torch.device("cpu"))
    checkpoint.load_model(model, checkpoint.load(path, torch.device("cpu")), path)
    model.eval()
    policy = mean_action(model)
    obs = env.reset()["obs"]
    speeds, rewards, diverged = [], [], 0
    with torch.no_grad():
        for _ in range(steps):
            out, reward, _, extras = env.step(policy(obs))
            obs = out["obs"]
            speeds.append(obs[:, TORSO_VELOCITY].norm(dim=1))
            rewards.append(reward)
            diverged += int(extras.get("diverged", 0))
    speed = torch.stack(speeds).flatten()
    quantiles = torch.quantile(speed, torch.tensor([0.5, 0.9, 0.99]))
    return {"checkpoint": path, "envs": envs, "steps": steps,
            "torso_speed_p50_p90_p99": [round(float(q), 2) for q in quantiles],
            "torso_speed_max": round(float(speed.max()), 1),
            "reward_per_step_median": round(float(torch.stack(rewards).median()), 2), "diverged": diverged}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for path in args.checkpoints:
        print(json.dumps(check(path, args.envs, args.steps, args.seed)), flush=True)


if __name__ == "__main__":
    main()
