"""Ingenuity's physics choice (benchmarks/history/ingenuity.md): the same random smooth action sequences at several
(integrator, timestep x substeps), the chassis' position after 1, 2, 5 s against a fine reference (rk4, 8 x 1.25 ms).
    python benchmarks/ingenuity_physics.py"""
import sys, torch
from isaac_ppo.envs import make

N, STEPS = 64, 500
g = torch.Generator().manual_seed(1)
# smooth random actions around hover (0.14): an AR(1) walk per env
acts = torch.zeros(STEPS, N, 6)
a = torch.zeros(N, 6)
for t in range(STEPS):
    a = 0.95 * a + 0.05 * (2 * torch.rand(N, 6, generator=g) - 1) * 3
    acts[t] = a
acts[..., 2] += 0.14; acts[..., 5] += 0.14

def run(integrator, timestep, substeps):
    e = make("Ingenuity", N, sim="mujoco", seed=0, maxEpisodeLength=10_000,
             mujoco={"integrator": integrator, "timestep": timestep, "substeps": substeps})
    e.reset()
    e.qpos[:, 0:3] = torch.tensor([0.0, 0.0, 30.0], dtype=e.qpos.dtype)  # high: no termination by height
    e.targets[:] = torch.tensor([0.0, 0.0, 30.0])
    out = {}
    for t in range(STEPS):
        e.step(acts[t])
        if t + 1 in (100, 200, 500):
            out[t + 1] = (e.qpos[:, 0:3].clone(), e.qpos[:, 3:7].clone())
    return out

ref = run("rk4", 0.00125, 8)
for cfg in [("euler", 0.01, 1), ("implicitfast", 0.01, 1), ("euler", 0.005, 2), ("implicitfast", 0.005, 2), ("rk4", 0.01, 1)]:
    res = run(*cfg)
    line = []
    for k in (100, 200, 500):
        dp = (res[k][0] - ref[k][0]).norm(dim=1)
        dq = (1 - (res[k][1] * ref[k][1]).sum(1).abs()).clamp(min=0)
        line.append(f"{k/100:.0f}s: pos err median {dp.median():.4f} max {dp.max():.4f} m")
    print(cfg, " | ".join(line), flush=True)
