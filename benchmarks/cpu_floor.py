"""The floor of one training iteration at a profile's settings: raw physics + policy inference + the update, each
timed alone on this machine, against what the runs of a study measured (collect_s and update_s per iteration).

    python benchmarks/cpu_floor.py [--task Ant] [--profile cpu] [--iterations 20] [--runs DIR ...]

- physics: a bare mujoco.batch.Batch of the task's model (isaac_ppo.lab.bench_sim.RawBatch), the iteration's
  num_envs x horizon steps from the env's own states, random controls, the collection's thread settings;
- inference: the model's forward on num_envs observations, horizon times, torch_threads = collect_torch_threads;
- update: PPO's update (the profile's epochs and minibatches) on a synthetic batch of the same size, with
  torch_threads threads (the same code path as training: optimizer, clipping, adaptive learning rate).
The glue is what the measured collect_s has beyond physics + inference (the task's observations, rewards and
resets in torch, the rollout buffer, the normaliser). The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import time

import torch

from isaac_ppo.agent.model import ActorCritic, gaussian_log_prob
from isaac_ppo.agent.ppo import PPO
from isaac_ppo.agent.rollout import RolloutBuffer
from isaac_ppo.lab.bench_sim import RawBatch
from isaac_ppo.envs import make
from isaac_ppo.scheduler import Plan
from isaac_ppo.config.compose import compose_config


def measured(run_globs):
    """Median collect_s and update_s per iteration over the study runs' rows, and their env steps per row."""
    collect, update = [], []
    for pattern in run_globs:
        for path in glob.glob(os.path.join(pattern, "metrics.jsonl")):
            for line in open(path):
                row = json.loads(line)
                collect.append(row["collect_s"])
                update.append(row["update_s"])
    if not collect:
        return {}
    return {"measured_collect_s": round(statistics.median(collect), 4),
            "measured_update_s": round(statistics.median(update), 4), "measured_rows": len(collect)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Ant")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--runs", nargs="*", default=[], help="run folders (globs) of the same settings")
    args = parser.parse_args()
    cfg = compose_config([f"task={args.task}", f"profile={args.profile}"])
    n, horizon = int(cfg.num_envs), int(cfg.agent.horizon)
    batch = n * horizon
    minibatches = int(cfg.agent.num_mini_batches or max(1, batch // int(cfg.agent.minibatch_size)))

    torch.set_num_threads(int(cfg.collect_torch_threads))
    env = make(args.task, n, sim="mujoco", seed=0, device="cpu")
    env.reset()
    raw = RawBatch(env)
    generator = torch.Generator().manual_seed(0)
    actions = [torch.rand(n, env.num_actions, generator=generator) * 2 - 1 for _ in range(horizon)]
    raw.run(actions[:2])  # warm-up
    physics = [raw.run(actions) for _ in range(args.iterations)]

    torch.manual_seed(0)
    model = ActorCritic(env.num_obs, env.num_actions, list(cfg.agent.network.hidden), cfg.agent.network.activation,
                        bool(cfg.agent.network.separate), float(cfg.agent.network.init_log_std))
    obs = torch.randn(n, env.num_obs)
    inference = []
    with torch.no_grad():
        model(obs)
        for _ in range(args.iterations):
            t0 = time.perf_counter()
            for _ in range(horizon):
                model(obs)
            inference.append(time.perf_counter() - t0)

    torch.set_num_threads(int(cfg.torch_threads))
    ppo = PPO(model, cfg.agent, torch.device("cpu"), torch.Generator().manual_seed(0))
    buffer = RolloutBuffer(horizon, n, env.num_obs, env.num_actions, torch.device("cpu"))
    with torch.no_grad():
        buffer.obs.copy_(torch.randn(horizon, n, env.num_obs))
        buffer.actions.copy_(torch.randn(horizon, n, env.num_actions))
        mu, log_std, values = model(buffer.obs)
        buffer.mu.copy_(mu)
        buffer.log_std.copy_(model.log_std)
        buffer.log_probs.copy_(gaussian_log_prob(buffer.actions, mu, log_std))
        buffer.values.copy_(values.reshape(horizon, n))
        buffer.returns.copy_(torch.randn(horizon, n))
        buffer.advantages.copy_(torch.randn(horizon, n))
    plan = Plan(num_envs=n, rollout_length=horizon, epochs=int(cfg.agent.mini_epochs),
                minibatch_size=batch // minibatches)
    ppo.update(buffer, plan)  # warm-up
    update = []
    for _ in range(args.iterations):
        t0 = time.perf_counter()
        ppo.update(buffer, plan)
        update.append(time.perf_counter() - t0)

    floor = {"physics_s": statistics.median(physics), "inference_s": statistics.median(inference),
             "update_s": statistics.median(update)}
    result = {"bench": "cpu_floor", "task": args.task, "profile": args.profile, "num_envs": n, "horizon": horizon,
              "epochs": int(cfg.agent.mini_epochs), "minibatches": minibatches, "nthread": raw.nthread,
              **{k: round(v, 4) for k, v in floor.items()}, "floor_s": round(sum(floor.values()), 4),
              "floor_env_steps_per_s": round(batch / sum(floor.values())), **measured(args.runs)}
    if "measured_collect_s" in result:
        result["glue_s"] = round(result["measured_collect_s"] - floor["physics_s"] - floor["inference_s"], 4)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
