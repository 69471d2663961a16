"""What each task's model adds to MuJoCo Warp's kernel compile on an empty cache (the suite's cold-cache cost).

MuJoCo Warp builds some kernels per model (the Cholesky and constraint kernels by the number of dofs, the narrow
phase by the geom pairs it meets, the convex and height-field collision kernels by geom type, tendons, sensors): a
fresh machine compiles them the first time each model steps, and the suite's sim=mjwarp tests pay it inside their
own time. This script makes each named task's env on Warp's CPU device (4 envs), resets and steps it once, in the
order given, all into one fresh kernel cache (a temporary folder, removed at the end), so each row is what that model
adds to the models before it; the first row includes the kernels every model shares.

  python benchmarks/mjwarp_compile_cost.py Cartpole Ant Ingenuity Quadcopter FrankaCubeStack AnymalTerrain \\
      ShadowHand AllegroHand

One JSON line a task: its seconds (make + reset + one step, nearly all compile) and the modules in the cache after
it. Run it alone on the machine (a compile is CPU-bound) and with CUDA hidden (CUDA_VISIBLE_DEVICES=) on a GPU node
to measure the CPU device.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time


def main(tasks: list) -> None:
    import warp as wp

    with tempfile.TemporaryDirectory(prefix="warp_cache_") as cache:
        wp.config.kernel_cache_dir = cache  # (before any module loads: every kernel is compiled into it)
        import torch

        from isaac_ppo.envs import make

        for task in tasks:
            started = time.perf_counter()
            env = make(task, 4, sim="mjwarp", seed=0)
            env.reset()
            env.step(torch.zeros(4, env.num_actions))
            modules = sum(len(os.listdir(os.path.join(cache, d))) for d in os.listdir(cache)
                          if os.path.isdir(os.path.join(cache, d)))
            print(json.dumps({"task": task, "seconds": round(time.perf_counter() - started, 1),
                              "modules_in_cache": modules}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python benchmarks/mjwarp_compile_cost.py TASK [TASK ...] (the first pays the shared kernels)")
    main(sys.argv[1:])
