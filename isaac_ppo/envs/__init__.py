"""Simulator backends behind one VecEnv contract (contract.py); make() builds one."""
from __future__ import annotations

from isaac_ppo.envs.make import available_tasks, make

__all__ = ["make", "available_tasks"]
