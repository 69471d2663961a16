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
   The (module, ARCH) compiles are independent: they run in PRECOMPILE_JOBS forked processes (default: one per
   core this process may use), each writing its own files into the cache the way Warp's cache expects several
   processes to (a build folder renamed into place). One NVRTC compile takes one core: on 2 cores the tasks'
   modules (121 for 8 tasks, 123 for 9) took 308 s for one ARCH one at a time and 170 s two at a time, and the
   default four ARCHs 642 s two at a time (2026-12-04: docs/docker.md). NVRTC leaves precompiled headers in /tmp,
   which the Dockerfile removes in the same layer.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import time

_JOBS: list = []  # (module, arch) pairs, inherited by the forked compilers


def _compile(index: int) -> tuple:
    """One ahead-of-time compile in a forked process; (arch, seconds)."""
    import warp as wp

    module, arch = _JOBS[index]
    started = time.perf_counter()
    wp.compile_aot_module(module, arch=arch)
    return arch, time.perf_counter() - started


def main(archs: list) -> int:
    import torch
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
    _JOBS[:] = [(module, int(arch)) for arch in archs for module in loaded]
    workers = min(int(os.environ.get("PRECOMPILE_JOBS") or len(os.sched_getaffinity(0))), max(len(_JOBS), 1))
    started = time.perf_counter()
    seconds = {int(arch): 0.0 for arch in archs}  # each ARCH's compile time summed over its modules
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            for arch, spent in pool.imap_unordered(_compile, range(len(_JOBS))):
                seconds[arch] += spent
    else:
        for index in range(len(_JOBS)):
            arch, spent = _compile(index)
            seconds[arch] += spent
    for arch, spent in seconds.items():
        print(f"[precompile] sm_{arch}: {len(loaded)} modules, {spent:.1f} s of compiling", flush=True)
    if archs:
        print(f"[precompile] {len(archs)} arch(s) x {len(loaded)} modules in {time.perf_counter() - started:.1f} s "
              f"on {workers} process(es)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or os.environ.get("WARP_CUDA_ARCHS", "").split()))
