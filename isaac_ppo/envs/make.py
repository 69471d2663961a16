"""make(): build a task behind the VecEnv contract on the chosen simulator.

sim="mujoco" builds the MuJoCo port on mujoco.batch (CPU); sim="mjwarp" the same port on MuJoCo Warp (on the
run's device: a CUDA GPU, or the CPU for tests); sim="isaacgym" builds the IsaacGymEnvs task. sim="auto" takes
Isaac Gym when it is loaded and CUDA is present; else MuJoCo Warp when the run's device is a CUDA GPU and
mujoco-warp is installed; else mujoco.batch. Task parameters come from cfg/task/<task>.yaml (or a
folder of ISAAC_PPO_TASK_PATH); the task's class is the one its YAML names (envs/registry.py).
"""
from __future__ import annotations

import importlib.util
from typing import Any, Dict, Optional

from omegaconf import DictConfig, OmegaConf

from isaac_ppo.envs import isaacgym as isaacgym_backend
from isaac_ppo.envs import registry
from isaac_ppo.envs.contract import check_num_envs
from isaac_ppo.envs.registry import available_tasks
from isaac_ppo.errors import UserError
from isaac_ppo.task_files import load_task_file, task_config_path

SIMS = ("auto", "mujoco", "mjwarp", "isaacgym")
MUJOCO_PORTS = ("mujoco", "mjwarp")  # the backends that run tasks/ (one definition of each task's semantics)
MUJOCO_HINT = "the MuJoCo backend needs mujoco>=3.17 (Python>=3.10): pip install 'mujoco>=3.17', or use sim=isaacgym"


def load_task_config(task: str, overrides: Optional[Dict[str, Any]] = None) -> DictConfig:
    """The task's config node, with overrides merged in.

    An override key names a top-level node (``env``, ``sim``, ``mujoco``; the value is merged into it) or
    a key of ``env`` (``episodeLength=200``, or a node of env such as ``learn={"episodeLength_s": 20}``, merged
    into it), as IsaacGymEnvs users write ``task.env.episodeLength=200``.
    """
    path = task_config_path(task)
    if path is None:
        raise UserError(f"unknown task {task!r}; available tasks: {', '.join(available_tasks())}")
    return apply_overrides(load_task_file(path), overrides, task)


def apply_overrides(cfg: DictConfig, overrides: Optional[Dict[str, Any]], task: str) -> DictConfig:
    for key, value in (overrides or {}).items():
        node = cfg if key in cfg and isinstance(cfg[key], DictConfig) else cfg.env
        if key in node and isinstance(node[key], DictConfig):
            if not isinstance(value, dict):
                raise UserError(f"task override {key!r} must be a mapping of its keys, got {value!r}")
            unknown = sorted(set(value) - set(node[key]))
            if unknown:
                raise UserError(
                    f"unknown key(s) {', '.join(unknown)} in task override {key!r}; "
                    f"known: {', '.join(sorted(node[key]))}"
                )
            node[key] = OmegaConf.merge(node[key], value)
        elif key in cfg.env:
            cfg.env[key] = value
        else:
            raise UserError(
                f"unknown task parameter {key!r} for {task}; env keys: {', '.join(sorted(cfg.env))}"
            )
    return cfg


def resolve_sim(sim: str, device: str = "cpu") -> str:
    """The concrete backend for sim on device (auto -> isaacgym, mjwarp or mujoco: see the module docstring)."""
    if sim not in SIMS:
        raise UserError(f"unknown sim {sim!r}; choose one of: {', '.join(SIMS)}")
    if sim != "auto":
        return sim
    if isaacgym_backend.available():
        return "isaacgym"
    if str(device).startswith("cuda") and importlib.util.find_spec("mujoco_warp") is not None:
        return "mjwarp"
    return "mujoco"


def make(
    task: str,
    /,
    num_envs: Optional[int] = None,
    sim: str = "auto",
    seed: int = 0,
    device: str = "cpu",
    task_cfg: Optional[Any] = None,
    isaacgym_options: Optional[Dict[str, Any]] = None,
    **overrides: Any,
) -> Any:
    """Build task with num_envs parallel envs (default: the task config's env.numEnvs) behind the VecEnv contract.

    device is where observations, rewards and flags arrive and where actions may live. On mujoco.batch the
    physics runs on the CPU and each step makes one copy to device; on MuJoCo Warp it runs on device. task_cfg, when given, is the whole task node (as
    Hydra composed it) in place of cfg/task/<task>.yaml; overrides apply on top of either. On Isaac Gym, what
    differs from cfg/task/<task>.yaml (but mujoco.*, the port's own) is forwarded onto IsaacGymEnvs' task config,
    and isaacgym_options are IsaacGymEnvs' device keys (isaacgym.make_env). task is positional only, so that an
    override of the task config's own `task` node (IsaacGymEnvs' randomisation switch) reads as the others:
    make("ShadowHandOpenAI_FF", 8, task={"randomize": False}).
    """
    if task_cfg is None:
        cfg = load_task_config(task, overrides)
    else:
        cfg = apply_overrides(OmegaConf.create(task_cfg), overrides, task)
    num_envs = check_num_envs(cfg.env.numEnvs if num_envs is None else num_envs)
    backend = resolve_sim(sim, device)
    if backend == "isaacgym":
        given = OmegaConf.to_container(cfg, resolve=True)
        defaults = OmegaConf.to_container(load_task_config(task), resolve=True)
        # (the port's, and our evaluation's: not IsaacGymEnvs')
        ours = ("mujoco", "name", "entry_point", "solve_thresholds", "solve_measures", "eval_env")
        changes = isaacgym_backend.changed_leaves({k: v for k, v in given.items() if k not in ours}, defaults)
        changes.pop("env.numEnvs", None)  # (num_envs is forwarded as such)
        return isaacgym_backend.make_env(task, num_envs, seed, device, changes, isaacgym_options)
    if importlib.util.find_spec("mujoco") is None or importlib.util.find_spec("mujoco.batch") is None:
        raise UserError(MUJOCO_HINT)
    task_class = registry.task_class(task, cfg.get("entry_point"))
    return task_class(OmegaConf.to_container(cfg, resolve=True), num_envs, seed=seed, device=device, sim=backend)
