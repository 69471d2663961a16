"""How fast a task's joints move on its MuJoCo port, against a speed limit: under trained policies, or under
bang-bang actions (what the physics allows at all). For the URDF velocity limits that Isaac Gym hands PhysX and
MuJoCo does not have (docs/tasks/legged.md, Anymal; docs/tasks/manipulation.md, FrankaCabinet).

    python benchmarks/joint_speeds.py TASK CHECKPOINT [CHECKPOINT ...] [--limit RAD_S] [--envs N] [--steps N]
    python benchmarks/joint_speeds.py TASK --bang-bang PERIOD [PERIOD ...] [--limit RAD_S] [--envs N] [--steps N]

Every hinge and slide joint of the model (not a free joint's base) on --envs envs from reset (mujoco.batch, seed
--seed), --steps control steps: a policy's mean action (the run's own task config), or actions of +-1 whose signs
are drawn at random every step (PERIOD 1) or drawn once and flipped every PERIOD steps. Prints, for each, the
fastest joint's peak |qvel| an env (10/50/90% over envs and the maximum), the share of joint-steps past --limit and
the 99th percentile of a joint's speed; the last line of each is one JSON object. A reset step's last speeds are
those of the new episode (one step of an episode missed at each reset).
"""
from __future__ import annotations

import argparse
import json

import torch


def measure(env, task: str, source: str, policy, steps: int, seed: int, limit: float, period: int = 0) -> dict:
    """One source's speeds on env (a task built with its envs and seed): policy's actions, else bang-bang's."""
    import mujoco

    envs, model = env.num_envs, env.model
    dofs = [int(model.jnt_dofadr[j]) for j in range(model.njnt)
            if int(model.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))]
    obs = env.reset()["obs"]
    generator = torch.Generator().manual_seed(seed)
    signs = torch.where(torch.rand(envs, env.num_actions, generator=generator) < 0.5, -1.0, 1.0)
    peak, over, speeds = torch.zeros(envs), 0, []
    with torch.no_grad():
        for t in range(steps):
            if policy is not None:
                actions = policy(obs)
            else:
                if period == 1:
                    signs = torch.where(torch.rand(envs, env.num_actions, generator=generator) < 0.5, -1.0, 1.0)
                elif t > 0 and t % period == 0:
                    signs = -signs
                actions = signs
            obs = env.step(actions)[0]["obs"]
            speed = env.qvel[:, dofs].abs().float().cpu()
            peak = torch.maximum(peak, speed.max(dim=1).values)
            over += int((speed > limit).sum())
            speeds.append(speed.flatten())
    every = torch.cat(speeds)
    deciles = [round(q, 2) for q in torch.quantile(peak, torch.tensor([0.1, 0.5, 0.9])).tolist()]
    return {"bench": "joint_speeds", "task": task, "source": source, "envs": envs, "steps": steps, "seed": seed,
            "joints": len(dofs), "peak_per_env_p10_p50_p90": deciles, "peak_max": round(float(peak.max()), 2),
            "limit": limit, "joint_steps_past_limit": round(over / every.numel(), 5),
            # (torch.quantile takes at most 2^24 values: an even stride through every step beyond a million)
            "joint_speed_p99": round(float(torch.quantile(every[::max(1, every.numel() // 1_000_000)], 0.99)), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task")
    parser.add_argument("checkpoints", nargs="*")
    parser.add_argument("--bang-bang", type=int, nargs="*", default=[], metavar="PERIOD")
    parser.add_argument("--limit", type=float, default=20.0, help="rad/s (m/s for a slide); Anymal's URDF: 20")
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if not args.checkpoints and not args.bang_bang:
        parser.error("give a CHECKPOINT or --bang-bang PERIOD")
    from omegaconf import OmegaConf

    from isaac_ppo.envs.make import make
    from isaac_ppo.loop.evaluate import mean_action
    from isaac_ppo.loop.play import load_checkpoint_model, run_config

    results = []
    for path in args.checkpoints:
        cfg = OmegaConf.load(run_config(path))
        task_cfg = OmegaConf.to_container(cfg.task, resolve=True)  # (the run's own task, as it trained)
        env = make(args.task, args.envs, sim="mujoco", seed=args.seed, task_cfg=task_cfg)
        policy = mean_action(load_checkpoint_model(cfg, env, path))
        results.append(measure(env, args.task, path, policy, args.steps, args.seed, args.limit))
    for period in args.bang_bang:
        env = make(args.task, args.envs, sim="mujoco", seed=args.seed)
        results.append(measure(env, args.task, f"bang-bang, period {period}", None, args.steps, args.seed,
                               args.limit, period=period))
    for result in results:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
