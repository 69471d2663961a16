"""Suite-wide options: which MuJoCo Warp models the suite compiles.

MuJoCo Warp compiles its kernels per model on first use, then caches them (from an empty cache on a quiet 2-core
machine: Cartpole 28 s, then Ant 9 s and Humanoid 4 s more; about 2 minutes for Cartpole when the cores are busy).
The default suite runs sim=mjwarp on Cartpole only; tests marked ``mjwarp_models`` need Ant and Humanoid too and
run with ``--mjwarp-all-models`` (before landing a change to tasks/ or tasks/sim_warp.py).
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption("--mjwarp-all-models", action="store_true", default=False,
                     help="also run the sim=mjwarp tests on Ant and Humanoid (compiles their MuJoCo Warp kernels)")


def pytest_configure(config):
    config.addinivalue_line("markers", "mjwarp_models: sim=mjwarp on Ant and Humanoid (run with --mjwarp-all-models)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--mjwarp-all-models"):
        return
    skip = pytest.mark.skip(reason="sim=mjwarp on Ant/Humanoid: pytest --mjwarp-all-models runs it")
    for item in items:
        if "mjwarp_models" in item.keywords:
            item.add_marker(skip)
