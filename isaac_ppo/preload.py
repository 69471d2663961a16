"""What must happen before torch is imported. Torch-free on purpose: console scripts call this first.

Isaac Gym refuses to load once torch is imported, so an entry point that may run on Isaac Gym (sim=auto or
sim=isaacgym) calls ``isaacgym_first()`` before importing anything that imports torch. Any failure just
means "not available": asking for sim=isaacgym later explains what is missing.

``idle_threads_sleep()``: torch's CPU build runs its intra-op threads on libgomp, which reads its wait policy once,
when torch loads. By default an idle thread spins on its core before it sleeps; when another process (a second run,
a sweep's parallel jobs, the suite's other worker) wants that core, the update's small operations wait on threads
that are not running (benchmarks/omp_wait_policy.py).
"""
from __future__ import annotations

import importlib.util
import os
import sys

# the variables that choose libgomp's wait: a user's own setting of either is kept
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def idle_threads_sleep() -> bool:
    """OMP_WAIT_POLICY=PASSIVE for this process and those it starts, unless torch is loaded (too late) or the user
    chose a wait (WAIT_VARIABLES). True when set here."""
    if "torch" in sys.modules or any(name in os.environ for name in WAIT_VARIABLES):
        return False
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True


def isaacgym_first() -> bool:
    """True when isaacgym is loaded (now or before)."""
    if "isaacgym" in sys.modules:
        return True
    if "torch" in sys.modules or importlib.util.find_spec("isaacgym") is None:
        return False
    try:
        import isaacgym  # noqa: F401
    except Exception:
        return False
    return True
