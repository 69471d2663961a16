"""Import Isaac Gym before torch, as it requires. Torch-free on purpose: console scripts call this first.

Isaac Gym refuses to load once torch is imported, so an entry point that may run on Isaac Gym (sim=auto or
sim=isaacgym) calls ``isaacgym_first()`` before importing anything that imports torch. Any failure just
means "not available": asking for sim=isaacgym later explains what is missing.
"""
from __future__ import annotations

import importlib.util
import sys


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
