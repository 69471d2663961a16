"""AllegroHand's physics step by measurement: substeps n of (controlFrequencyInv x sim.dt) / n, implicitfast.
For each n: (1) the block resting on the held hand (relative control, zero actions) for 2 s: its drift in the
second second, how many fell, its final position against the finest step's; (2) random and bang-bang actions:
the hand's peak joint speeds (p50 / p99 / max over envs), falls, diverged envs, the largest |qvel| and |reward|;
(3) the same start and random actions for 10 control steps: joint positions against the finest step's;
(4) cost: env steps/s at 64 envs, nthread 1.
    python benchmarks/allegro_hand_physics.py [n ...]"""
import json, sys, time
import torch
from isaac_ppo.envs import make

CONTROL = 2 * 0.01667
CANDIDATES = [int(a) for a in sys.argv[1:] if a.isdigit()] or [2, 4, 8, 16]
REF = max(CANDIDATES)


def env_for(n, envs, seed=0, **env):
    return make("AllegroHand", envs, sim="mujoco", seed=seed, env=env,
                mujoco={"timestep": CONTROL / n, "substeps": n, "nthread": 1})


def rest(n):
    env = env_for(n, 16, useRelativeControl=True)
    env.reset()
    zero = torch.zeros(16, 16)
    at = env.block_qpos
    fell = torch.zeros(16, dtype=torch.bool)
    for t in range(60):
        _, _, done, _ = env.step(zero)
        fell |= done
        if t == 29:
            mid = env.qpos[:, at:at + 3].clone()
    end = env.qpos[:, at:at + 3].clone()
    return {"fell": int(fell.sum()), "drift_2nd_second_m_max": float((end - mid).norm(dim=1).max()),
            "speed_end_max": float(env.qvel[:, env.block_qvel:env.block_qvel + 3].norm(dim=1).max())}, end


def driven(n, kind, steps=150, envs=32):
    env = env_for(n, envs, seed=1)
    env.reset()
    g = torch.Generator().manual_seed(2)
    signs = torch.where(torch.rand(envs, 16, generator=g) < 0.5, -1.0, 1.0)
    peak = torch.zeros(envs)
    qmax = rmax = 0.0
    falls = diverged = 0
    for t in range(steps):
        if kind == "random":
            a = 2 * torch.rand(envs, 16, generator=g) - 1
        elif kind == "bang1":
            a = torch.where(torch.rand(envs, 16, generator=g) < 0.5, -1.0, 1.0)
        else:  # bang4
            if t % 4 == 0:
                signs = -signs
            a = signs
        _, r, done, ex = env.step(a)
        speeds = env.qvel[:, :16].abs().amax(dim=1).float()
        peak = torch.maximum(peak, speeds)
        qmax = max(qmax, float(env.qvel.abs().max()))
        rmax = max(rmax, float(r.abs().max()))
        falls += int((done & ~ex["time_outs"]).sum())
        diverged += int(ex["diverged"])
    p = peak.sort().values
    return {"peak_p50": round(float(p[len(p) // 2]), 2), "peak_p99": round(float(p[-1 if len(p) < 100 else int(0.99 * len(p))]), 2),
            "peak_max": round(float(p.max()), 2), "ends": falls, "diverged": diverged,
            "max_abs_qvel": round(qmax, 1), "max_abs_reward": round(rmax, 2)}


def track(n, steps=10):
    env = env_for(n, 16, seed=3)
    env.reset()
    g = torch.Generator().manual_seed(4)
    for _ in range(steps):
        env.step(2 * torch.rand(16, 16, generator=g) - 1)
    return env.qpos[:, :16].clone(), env.qpos[:, 16:19].clone()


def cost(n, envs=64, steps=60):
    env = env_for(n, envs, seed=5)
    env.reset()
    g = torch.Generator().manual_seed(6)
    acts = [2 * torch.rand(envs, 16, generator=g) - 1 for _ in range(steps)]
    env.step(acts[0])
    t = time.perf_counter()
    for a in acts:
        env.step(a)
    return envs * steps / (time.perf_counter() - t)


def main():
  results, ends, tracks = {}, {}, {}
  for n in CANDIDATES:
      r, ends[n] = rest(n)
      results[n] = {"timestep": CONTROL / n, "rest": r}
      for kind in ("random", "bang1", "bang4"):
          results[n][kind] = driven(n, kind)
      tracks[n] = track(n)
      results[n]["env_steps_per_s_64envs_1thread"] = round(cost(n))
  for n in CANDIDATES:
      results[n]["rest"]["end_vs_finest_m_max"] = float((ends[n] - ends[REF]).norm(dim=1).max())
      results[n]["joints_after_10_steps_vs_finest_rad"] = {
          "mean": round(float((tracks[n][0] - tracks[REF][0]).abs().mean()), 4),
          "max": round(float((tracks[n][0] - tracks[REF][0]).abs().max()), 4)}
      results[n]["block_after_10_steps_vs_finest_m_max"] = round(float((tracks[n][1] - tracks[REF][1]).norm(dim=1).max()), 4)
      print(json.dumps({"substeps": n, **results[n]}))


if __name__ == "__main__":
    main()
