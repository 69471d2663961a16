"""What AnymalTerrain's terrain and each randomisation cost: env steps per second through the VecEnv contract
(observations with the 140 height samples, rewards, resets, curriculum) under uniform random actions, for
IsaacGymEnvs' configuration and with one feature off at a time, interleaved in rounds so that every variant sees the
same machine state. Run it alone on the machine (nothing else on its cores).

  python benchmarks/anymal_terrain_costs.py [--envs 4096] [--steps 30] [--rounds 3] [--sim mujoco]
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import torch

VARIANTS = {
    "IsaacGymEnvs' (terrain, noise, friction per env, pushes)": {},
    "no observation noise": {"learn": {"addNoise": False}},
    "no friction randomisation (no per-env model field)": {"learn": {"randomizeFriction": False}},
    # (a push is one velocity write every 750 steps: at the interval of one step here, its most)
    "pushes every step (IsaacGymEnvs': every 750)": {"learn": {"pushInterval_s": 0.02}},
    "flat floor (terrainType plane, heights 0)": {"terrain": {"terrainType": "plane"}},
    "none of them (plane, no noise, friction or pushes)": {
        "terrain": {"terrainType": "plane"},
        "learn": {"addNoise": False, "randomizeFriction": False, "pushRobots": False}},
}


def rate(env, actions, steps: int) -> float:
    started = time.perf_counter()
    for t in range(steps):
        env.step(actions[t % len(actions)])
    return env.num_envs * steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sim", default="mujoco")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", default=None, help="a variant's name (default: all)")
    args = parser.parse_args()
    from isaac_ppo.envs import make

    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    actions = [(torch.rand(args.envs, 12, generator=generator) * 2 - 1).to(args.device) for _ in range(8)]
    chosen = {k: v for k, v in VARIANTS.items() if args.only in (None, k)}
    envs = {}
    for name, overrides in chosen.items():
        env = make("AnymalTerrain", args.envs, sim=args.sim, seed=0, device=args.device, **overrides)
        env.reset()
        rate(env, actions, 3)  # (warm-up: first steps, graphs, caches)
        envs[name] = env
    rates = {name: [] for name in envs}
    for _ in range(args.rounds):
        for name, env in envs.items():
            rates[name].append(rate(env, actions, args.steps))
    base = max(rates[next(iter(rates))])
    print(json.dumps({"sim": args.sim, "device": args.device, "envs": args.envs, "steps": args.steps,
                      "rounds": args.rounds, "machine": platform.processor() or platform.machine(),
                      "env_steps_per_s (best of rounds)": {k: round(max(v)) for k, v in rates.items()},
                      "cost vs IsaacGymEnvs' (best/best)": {k: round(base / max(v), 3) for k, v in rates.items()}},
                     indent=1))


if __name__ == "__main__":
    main()
