"""Compile MuJoCo Warp's kernels for our tasks into WARP_CACHE_PATH, so that sim=mjwarp starts without compiling.

Run at image build (docker/Dockerfile with --build-arg EXTRAS=video,mjwarp), where there is no GPU:

  python mjwarp_precompile.py [ARCH ...]      # e.g. 80 86 89 90: CUDA compute capabilities, none = CPU only

(no ARCH given: the space-separated WARP_CUDA_ARCHS of the environment, the Dockerfile's build arg)

1. For each registered task (isaac_ppo.envs.registry.registered_tasks()) an env is built and stepped on Warp's CPU
   device: this compiles every kernel the task uses for the CPU (sim=mjwarp device=cpu) and registers the kernel
   modules.
2. For each ARCH, every module step 1 loaded is compiled ahead of time for that GPU architecture with NVRTC
   (warp.compile_aot_module; no GPU or driver needed) into the same cache, where a run on a GPU of that
   architecture finds it. A kernel MuJoCo Warp uses on CUDA only (none seen on the CPU pass) still compiles
   on the first run on the GPU; keep the cache on a volume to pay that once.
"""
from __future__ import annotations

import os
import sys
import time


def main(archs: list) -> int:
    import torch
    import warp as wp
    from warp._src.context import user_modules

    from isaac_ppo.envs import make
    from isaac_ppo.envs.registry import registered_tasks

    # every task a run may name: one whose kernels are missing compiles them on the GPU
    for task in registered_tasks():
        started = time.perf_counter()
        env = make(task, 4, sim="mjwarp", device="cpu")
        env.reset()
        env.step(torch.zeros(4, env.num_actions))
        print(f"[precompile] {task}: CPU kernels ready in {time.perf_counter() - started:.1f} s", flush=True)
    loaded = [module for module in list(user_modules.values()) if module.execs]
    for arch in archs:
        started = time.perf_counter()
        for module in loaded:
            wp.compile_aot_module(module, arch=int(arch))
        print(f"[precompile] sm_{arch}: {len(loaded)} modules in {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or os.environ.get("WARP_CUDA_ARCHS", "").split()))
