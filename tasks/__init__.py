"""MuJoCo ports of IsaacGymEnvs tasks (shipped as isaac_ppo.tasks).

TASKS maps a task name (as in cfg/task/<name>.yaml) to the class implementing it; mujoco is imported only
when a task is built.
"""
from __future__ import annotations

import importlib
from typing import Any

TASKS = {
    "Cartpole": "isaac_ppo.tasks.classic.cartpole:Cartpole",
    "Ant": "isaac_ppo.tasks.locomotion.ant:Ant",
    "Humanoid": "isaac_ppo.tasks.locomotion.humanoid:Humanoid",
}


def task_class(name: str) -> Any:
    module, attr = TASKS[name].split(":")
    return getattr(importlib.import_module(module), attr)
