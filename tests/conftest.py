"""Suite-wide settings: each xdist worker on cores of its own, and which MuJoCo Warp models the suite compiles.

With `pytest -n N`, worker i is pinned to its share of the CPUs this process may use (os.sched_setaffinity;
the training processes it starts inherit it). MuJoCo's thread pool sizes itself to those CPUs (task.mujoco.nthread
0), so N workers no longer run N pools of every core's threads on the same cores: on 2 cores that oversubscription
made the training tests a third slower (98 s against 65 s for three test files). Nothing a test asserts depends on
it: physics is the same with any thread count, and torch_threads (2, the config's) is left as it is.

MuJoCo Warp compiles its kernels per model on first use, then caches them (from an empty cache on a quiet 2-core
machine: Cartpole 28 s, then Ant 9 s and Humanoid 4 s more; about 2 minutes for Cartpole when the cores are busy).
The default suite runs sim=mjwarp on Cartpole only; tests marked ``mjwarp_models`` need Ant and Humanoid too and
run with ``--mjwarp-all-models`` (before landing a change to tasks/ or tasks/sim/warp.py). ``--mjwarp-device=cuda``
runs the contract suite's and the equivalence tests' MuJoCo Warp envs on a GPU (the GPU kit's proof,
benchmarks/gpu/); the default, cpu, is Warp's CPU device.
"""
from __future__ import annotations

import os

import pytest

MJWARP_DEVICE = "ISAAC_PPO_TEST_MJWARP_DEVICE"


def _pin_xdist_worker() -> None:
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2 or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    share = len(cpus) // count
    if share >= 1:
        index = int(worker[2:]) % count
        os.sched_setaffinity(0, cpus[index * share:(index + 1) * share])


def pytest_addoption(parser):
    parser.addoption("--mjwarp-all-models", action="store_true", default=False,
                     help="also run the sim=mjwarp tests on Ant and Humanoid (compiles their MuJoCo Warp kernels)")
    parser.addoption("--mjwarp-device", default=None,
                     help="the device of the MuJoCo Warp envs in the contract and equivalence tests (default cpu: "
                          f"Warp's CPU device; cuda on a GPU); sets {MJWARP_DEVICE}")


def pytest_configure(config):
    _pin_xdist_worker()
    if config.getoption("--mjwarp-device"):  # (read by the test modules when they are imported, after this)
        os.environ[MJWARP_DEVICE] = config.getoption("--mjwarp-device")
    config.addinivalue_line("markers", "mjwarp_models: sim=mjwarp on Ant and Humanoid (run with --mjwarp-all-models)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--mjwarp-all-models"):
        return
    skip = pytest.mark.skip(reason="sim=mjwarp on a task other than Cartpole: pytest --mjwarp-all-models runs it")
    for item in items:
        if "mjwarp_models" in item.keywords:
            item.add_marker(skip)
