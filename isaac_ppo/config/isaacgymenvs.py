"""IsaacGymEnvs' top-level keys, as its users type them, and what each means here.

- ``rl_device`` is IsaacGymEnvs' name for ``device`` (where the learner runs): given, it sets ``device``.
- ``sim_device``, ``pipeline``, ``graphics_device_id``, ``headless``, ``force_render``: passed to IsaacGymEnvs on
  ``sim=isaacgym``; on MuJoCo (physics on the CPU, no viewer) they mean nothing, and a run that sets them says so
  in one note line each rather than ignoring them in silence.
- ``torch_deterministic`` and ``seed=-1`` are applied when the run starts (isaac_ppo/train.py): deterministic
  torch algorithms, and a random seed drawn, printed and recorded in config.yaml.
- ``train=NAME`` is an alias of ``agent=NAME`` on the command line (isaac_ppo/train.py).
"""
from __future__ import annotations

import copy
import os
import secrets
from typing import Any, Dict, List, Optional

from omegaconf import DictConfig, OmegaConf

# keys only Isaac Gym reads: passed to isaacgymenvs.make
ISAACGYM_OPTIONS = ("sim_device", "pipeline", "graphics_device_id", "headless", "force_render")


def translate(resolved: Dict[str, Any]) -> Dict[str, Any]:
    """The resolved config with IsaacGymEnvs' names mapped onto ours (rl_device -> device)."""
    if resolved.get("rl_device"):
        return dict(resolved, device=resolved["rl_device"])
    return resolved


def isaacgym_options(cfg: DictConfig) -> Dict[str, Any]:
    """The device keys isaacgymenvs.make is given (None: its default here, see isaac_ppo/envs/isaacgym.py)."""
    return {key: cfg[key] for key in ISAACGYM_OPTIONS}


def notes(cfg: DictConfig, backend: str) -> List[str]:
    """One line for each IsaacGymEnvs key this run sets that means nothing on its backend."""
    if backend == "isaacgym":
        return []
    if backend == "mjwarp":
        where = f"MuJoCo Warp's physics runs on device={cfg.device} here, beside the learner"
    else:
        where = f"MuJoCo's physics runs on the CPU here (the learner on device={cfg.device})"
    viewer = "MuJoCo has no viewer here (capture_video=true films env 0 offscreen)"
    out = []
    if cfg.sim_device not in (None, "cpu"):
        out.append(f"sim_device={cfg.sim_device} is Isaac Gym's: {where}")
    if cfg.pipeline == "gpu":
        out.append(f"pipeline=gpu is Isaac Gym's: {where}, one copy to device per step")
    if cfg.graphics_device_id is not None:
        out.append(f"graphics_device_id={cfg.graphics_device_id} is Isaac Gym's: {viewer}")
    if not cfg.headless:
        out.append(f"headless=false: {viewer}")
    if cfg.force_render:
        out.append(f"force_render=true is Isaac Gym's: {viewer}")
    return out


def make_deterministic() -> None:
    """torch_deterministic=true, as IsaacGymEnvs' set_seed does: deterministic algorithms (an op without one
    raises), cuDNN without autotuning, cuBLAS with a fixed workspace."""
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)


def draw_seed() -> int:
    """seed=-1: a random seed (IsaacGymEnvs draws from [0, 10000]; a wider range makes collisions rare)."""
    return secrets.randbelow(2**31)


def saved_seed(checkpoint_path: Optional[str]) -> Optional[int]:
    """The seed in config.yaml of the run a checkpoint belongs to (resuming with seed=-1 continues its seed)."""
    if not checkpoint_path:
        return None
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(checkpoint_path))), "config.yaml")
    return int(OmegaConf.load(path).seed) if os.path.isfile(path) else None


def isaacgymenvs_keys_at_start(cfg: Any, comm: Any, resume_from: Optional[str]) -> Any:
    """IsaacGymEnvs' keys that act when the run starts: torch_deterministic; seed=-1 (drawn on rank 0 for every
    rank, or the resumed run's own; config.yaml records it); a note for each device key that means nothing on
    this run's backend. Returns the config with the seed set (a copy: the loaded one is shared)."""
    from isaac_ppo.envs.make import resolve_sim

    if cfg.torch_deterministic:
        make_deterministic()
    if comm.is_main:
        for note in notes(cfg, resolve_sim(cfg.sim, cfg.device)):
            print(f"[{cfg.task.name}] note: {note}")
    if cfg.seed != -1:
        return cfg
    cfg = copy.deepcopy(cfg)
    seed = saved_seed(resume_from) if resume_from else None
    OmegaConf.set_readonly(cfg, False)
    cfg.seed = comm.broadcast_object(seed if seed is not None else draw_seed())
    OmegaConf.set_readonly(cfg, True)
    if comm.is_main:
        how = "the resumed run's" if seed is not None else "drawn at random"
        print(f"[{cfg.task.name}] seed=-1: seed {cfg.seed} ({how}; config.yaml records it, seed={cfg.seed} "
              "repeats the run)")
    return cfg
