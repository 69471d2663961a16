"""What IsaacGymEnvs' domain randomisation costs a task's env steps per second: the task as shipped (randomize
false), with its randomization_params block on at the block's frequency, and with a re-draw at every reset
(frequency 1: the most the schema can ask), stepped through the VecEnv contract under uniform random actions,
interleaved in rounds so that every variant sees the same machine state. Re-draws happen at resets once an env has
stepped `frequency` control steps since its last draw, so the warm-up runs past the frequency before the clock
starts: the timed steps hold the re-draws a training run sees, and the script counts them. Run it alone on the
machine (nothing else on its cores).

  python benchmarks/randomization_cost.py [--task ShadowHand] [--envs 256] [--warmup 800] [--steps 250]
                                          [--rounds 4] [--sim mujoco]
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Dict, List

import torch

VARIANTS = {
    "shipped (randomize false)": {"task": {"randomize": False}},
    "randomize true (the block's frequency)": {"task": {"randomize": True}},
    "randomize true, a re-draw at every reset (frequency 1)": {
        "task": {"randomize": True, "randomization_params": {"frequency": 1}}},
}


def count_redraws(env, tally: Dict[str, int]) -> None:
    """Wrap the env's randomizer so that each reset adds the envs whose parameters it re-draws to tally."""
    randomizer = getattr(env, "randomizer", None)
    if randomizer is None:
        return
    on_reset = randomizer.on_reset

    def counted(ids: torch.Tensor) -> None:
        before = randomizer.steps_since[ids].clone()
        on_reset(ids)
        tally["envs_redrawn"] += int(((before >= randomizer.plan.frequency) & (randomizer.steps_since[ids] == 0)).sum())

    randomizer.on_reset = counted


def run(env, actions: List[torch.Tensor], steps: int) -> float:
    started = time.perf_counter()
    for t in range(steps):
        env.step(actions[t % len(actions)])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="ShadowHand")
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=800, help="control steps before the clock (past frequency)")
    parser.add_argument("--steps", type=int, default=250, help="control steps a round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--sim", default="mujoco")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    from isaac_ppo.envs import make

    torch.set_num_threads(1)  # (training's collection threads)
    envs, tallies = {}, {}
    for name, overrides in VARIANTS.items():
        env = make(args.task, args.envs, sim=args.sim, seed=0, device=args.device, **overrides)
        env.reset()
        generator = torch.Generator().manual_seed(0)
        actions = [(torch.rand(args.envs, env.num_actions, generator=generator) * 2 - 1).to(args.device)
                   for _ in range(16)]
        run(env, actions, args.warmup)
        tallies[name] = {"envs_redrawn": 0}
        count_redraws(env, tallies[name])
        envs[name] = (env, actions)
    seconds = {name: [] for name in envs}
    for _ in range(args.rounds):
        for name, (env, actions) in envs.items():
            seconds[name].append(run(env, actions, args.steps))
    base = sum(seconds[next(iter(seconds))])
    timed_env_steps = args.envs * args.steps * args.rounds
    print(json.dumps({
        "task": args.task, "sim": args.sim, "device": args.device, "envs": args.envs, "warmup": args.warmup,
        "steps_a_round": args.steps, "rounds": args.rounds, "machine": platform.processor() or platform.machine(),
        "env_steps_per_s (all rounds)": {k: round(timed_env_steps / sum(v)) for k, v in seconds.items()},
        "env_steps_per_s (each round)": {k: [round(args.envs * args.steps / s) for s in v] for k, v in seconds.items()},
        "time vs shipped (all rounds)": {k: round(sum(v) / base, 3) for k, v in seconds.items()},
        "envs re-drawn in the timed steps (per 1,000 env steps)": {
            k: round(1000 * t["envs_redrawn"] / timed_env_steps, 2) for k, t in tallies.items()},
    }, indent=1))


if __name__ == "__main__":
    main()
