"""Where task YAMLs are and how one is read: the package's cfg/task/ and the folders of ISAAC_PPO_TASK_PATH, and a
task file's `defaults` list (a file that starts from another's, as IsaacGymEnvs' ShadowHandOpenAI_LSTM.yaml starts
from ShadowHandOpenAI_FF.yaml) merged as Hydra merges it. A leaf module, torch-free: the registry (envs/registry.py)
and the config checks (config/) both read task files through it.
"""
from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

from isaac_ppo.errors import UserError

TASK_PATH_ENV = "ISAAC_PPO_TASK_PATH"  # folders of task YAMLs besides the package's own (os.pathsep-separated)


def task_config_dirs() -> List[str]:
    """Where task YAMLs are looked up, in order: the package's cfg/task/, then ISAAC_PPO_TASK_PATH's folders."""
    import isaac_ppo.cfg

    own = os.path.join(os.path.dirname(os.path.abspath(isaac_ppo.cfg.__file__)), "task")
    extra = [d for d in os.environ.get(TASK_PATH_ENV, "").split(os.pathsep) if d]
    return [own] + extra


def task_config_path(name: str) -> Optional[str]:
    """The task YAML of task `name`: the first task_config_dirs() folder that holds <name>.yaml; None if none does."""
    for folder in task_config_dirs():
        path = os.path.join(folder, name + ".yaml")
        if os.path.isfile(path):
            return path
    return None


def load_task_file(path: str, _seen: Tuple[str, ...] = ()) -> Any:
    """A task YAML as Hydra composes it into the task group: a file may start from another task's file with a
    `defaults` list, as IsaacGymEnvs' do (ShadowHandOpenAI_LSTM.yaml: `defaults: [ShadowHandOpenAI_FF, _self_]`):
    each named file (looked up beside it, then in task_config_dirs()) merged in order, the file's own keys where
    `_self_` stands (last when it is not listed, as Hydra places it)."""
    from omegaconf import OmegaConf

    own = OmegaConf.load(path)
    if "defaults" not in own:
        return own
    entries = list(own.pop("defaults") or [])
    if "_self_" not in entries:
        entries.append("_self_")
    merged = OmegaConf.create()
    for entry in entries:
        if entry == "_self_":
            merged = OmegaConf.merge(merged, own)
            continue
        beside = os.path.join(os.path.dirname(path), f"{entry}.yaml")
        base = beside if os.path.isfile(beside) else task_config_path(str(entry))
        if not isinstance(entry, str) or base is None or base in _seen + (path,):
            raise UserError(f"{path}: defaults entry {entry!r} names no other task file (a task file starts from "
                            "another by its name, e.g. defaults: [ShadowHandOpenAI_FF, _self_])")
        merged = OmegaConf.merge(merged, load_task_file(base, _seen + (path,)))
    return merged
