"""The packaged YAML files that are not Hydra config groups (cfg/tune/ search spaces, cfg/study/ studies): found
by name, or given as a path to the user's own file, and read as plain data; and a task's solve goals read from its
cfg/task/<task>.yaml (what tune and a study aim at, before any run is composed)."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

from isaac_ppo.errors import UserError


def cfg_dir(kind: str) -> str:
    """The packaged folder cfg/<kind>/ (isaac_ppo.cfg in an installed wheel)."""
    import isaac_ppo.cfg

    return os.path.join(os.path.dirname(isaac_ppo.cfg.__file__), kind)


def load_named(kind: str, name: str, label: str) -> Tuple[str, Any]:
    """(path, data) of cfg/<kind>/<name>.yaml, or of the file `name` names when it ends in .yaml; a missing one is
    a UserError that lists what there is. label begins the message (e.g. "space=x: no search space")."""
    from omegaconf import OmegaConf

    path = name if name.endswith((".yaml", ".yml")) else os.path.join(cfg_dir(kind), f"{name}.yaml")
    if not os.path.isfile(path):
        known = sorted(f[:-5] for f in os.listdir(cfg_dir(kind)) if f.endswith(".yaml"))
        raise UserError(f"{label} {path}; available: {', '.join(known)} (or a path to a .yaml)")
    return path, OmegaConf.to_container(OmegaConf.load(path), resolve=True)


def task_goals(task: str) -> Tuple[List[float], Dict[str, List[float]]]:
    """The packaged task config's solve_thresholds (returns) and solve_measures (measure -> thresholds); ([], {})
    for a task the package does not ship."""
    from omegaconf import OmegaConf

    path = os.path.join(cfg_dir("task"), f"{task}.yaml")
    if not os.path.isfile(path):
        return [], {}
    from isaac_ppo.task_files import load_task_file  # (a task file may start from another's: its defaults)

    config = OmegaConf.to_container(load_task_file(path))
    return list(config.get("solve_thresholds") or []), dict(config.get("solve_measures") or {})


def default_task() -> str:
    """The task a run trains when no task= is given: the packaged config.yaml's defaults list."""
    from omegaconf import OmegaConf

    config = OmegaConf.load(os.path.join(os.path.dirname(cfg_dir("task")), "config.yaml"))
    defaults = OmegaConf.to_container(config.defaults)  # (as written: the ${task} interpolations unresolved)
    return next(str(entry["task"]) for entry in defaults if isinstance(entry, dict) and "task" in entry)
