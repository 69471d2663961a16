"""Suite-wide settings: each xdist worker on cores of its own, and which MuJoCo Warp models the suite compiles.

With `pytest -n N`, worker i is pinned to its share of the CPUs this process may use (os.sched_setaffinity;
the training processes it starts inherit it). MuJoCo's thread pool sizes itself to those CPUs (task.mujoco.nthread
0), so N workers no longer run N pools of every core's threads on the same cores: on 2 cores that oversubscription
made the training tests a third slower (98 s against 65 s for three test files). Nothing a test asserts depends on
it: physics is the same with any thread count, and torch_threads (2, the config's) is left as it is.

MuJoCo Warp compiles its kernels per model on first use, then caches them (benchmarks/mjwarp_compile_cost.py). The
default suite compiles the models of tests/helpers.py's MJWARP_SUITE_MODELS (Cartpole, and Ant, Ingenuity and
AllegroHand for the randomisation schema's tests); tests marked ``mjwarp_models`` (another model on sim=mjwarp, or
the contract and equivalence suites beyond Cartpole) run with ``--mjwarp-all-models`` (before landing a change to
tasks/ or tasks/sim/warp.py). On a CPU the suite compiles Warp's kernels at optimisation level 1
(ISAAC_PPO_WARP_OPT_LEVEL, tasks/sim/warp.py; set it to run at another): from an empty cache on a 2-core AMD EPYC
(AVX2), Cartpole, Ant and AllegroHand took 91.7 s at Warp's default -O2 and 67.6 s at -O1, whose kernels step Ant
1.06x and AllegroHand 1.56x slower (-O0: 43.2 s, but its steps are 6-14x slower). ``--mjwarp-device=cuda`` runs the
contract suite's and the equivalence tests' MuJoCo Warp envs on a GPU (the GPU kit's proof, benchmarks/gpu/): the
suite then leaves the level at Warp's default, the level of the kernels the kit carries compiled; the default
device, cpu, is Warp's CPU device.
"""
from __future__ import annotations

import os

import pytest

from isaac_ppo import preload

# torch's idle threads sleep in the suite's own processes as they do in the CLI's (isaac_ppo/preload.py): set here,
# before any test module loads torch, and inherited by the xdist workers and everything they start
preload.idle_threads_sleep()

MJWARP_DEVICE = "ISAAC_PPO_TEST_MJWARP_DEVICE"
WARP_OPT_LEVEL = "ISAAC_PPO_WARP_OPT_LEVEL"  # (read by tasks/sim/warp.py in this process and the ones it starts)
SUITE_WARP_OPT_LEVEL = "1"


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
                     help="also run the sim=mjwarp tests on every other task (compiles their MuJoCo Warp kernels)")
    parser.addoption("--mjwarp-device", default=None,
                     help="the device of the MuJoCo Warp envs in the contract and equivalence tests (default cpu: "
                          f"Warp's CPU device; cuda on a GPU); sets {MJWARP_DEVICE}")


def pytest_configure(config):
    _pin_xdist_worker()
    device = config.getoption("--mjwarp-device") or ""
    if device:  # (read by the test modules when they are imported, after this)
        os.environ[MJWARP_DEVICE] = device
    if not device.startswith("cuda"):  # (setdefault: a level set outside wins)
        os.environ.setdefault(WARP_OPT_LEVEL, SUITE_WARP_OPT_LEVEL)
    config.addinivalue_line("markers", "mjwarp_models: a sim=mjwarp case beyond the default suite's (run with "
                                       "--mjwarp-all-models)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--mjwarp-all-models"):
        return
    skip = pytest.mark.skip(reason="a sim=mjwarp case beyond the default suite's (its models: "
                                   "tests/helpers.py MJWARP_SUITE_MODELS): pytest --mjwarp-all-models runs it")
    for item in items:
        if "mjwarp_models" in item.keywords:
            item.add_marker(skip)
