"""isaac-ppo: PPO for thousands of parallel simulated robots (Isaac Gym on GPUs, MuJoCo's batched simulator anywhere)."""
from __future__ import annotations

__version__ = "0.1.0"
