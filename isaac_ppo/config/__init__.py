"""The composed config turned into the one typed, checked object the rest of the package reads.

`load` is the boundary: Hydra's composition is resolved, merged into the schemas (config/schema.py: types,
required keys) and checked against every rule (config/checks.py). Past it, values have their types (no casts)
and are known to be valid. A launch loads its config twice (before Hydra makes a run directory, and in Hydra's
task function): the second load of the same resolved config returns the first's result without checking again.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from omegaconf import DictConfig, OmegaConf

from isaac_ppo.config.schema import Config, typed

_loaded: Dict[str, DictConfig] = {}  # resolved YAML -> its typed, checked config (this process's launches)


def load(composed: Any) -> DictConfig:
    """The typed, checked config of Hydra's composition; a mistake raises UserError naming the key."""
    resolved = OmegaConf.to_container(composed, resolve=True) if not isinstance(composed, dict) else composed
    key = OmegaConf.to_yaml(resolved)
    if key not in _loaded:
        from isaac_ppo.config import isaacgymenvs
        from isaac_ppo.config.checks import check  # (it imports the scheduler package, which reads configs)

        cfg = typed(isaacgymenvs.translate(resolved))
        check(cfg)
        _loaded.clear()  # one launch at a time: keep only the newest
        _loaded[key] = cfg
    return _loaded[key]


# what a resumed run may change without becoming another run: budgets, saving, threads, where files go, play,
# what is measured (the training-return window starts anew when its size changes)
CHANGEABLE_ON_RESUME = frozenset({
    "resume", "checkpoint", "max_iterations", "max_env_steps", "save_interval", "torch_threads",
    "collect_torch_threads", "headless", "test", "play_episodes", "capture_video", "runs_dir", "diagnostics.plot",
    "max_diverged_fraction", "eval.interval", "eval.final", "eval.stochastic", "save_probe_set", "diagnostics.probe_set",
    "agent.games_to_track", "capture_video_freq", "capture_video_len", "wandb_activate", "wandb_project",
    "wandb_entity", "wandb_group", "wandb_name", "wandb_tags", "wandb_logcode_dir", "wandb_logcode",
})


def resume_mismatch(saved_config_path: str, cfg: DictConfig) -> Optional[str]:
    """Why the run whose config.yaml is at saved_config_path is not this config's run (the first key that
    differs, with both values), or None when it is."""
    import os

    if not os.path.isfile(saved_config_path):
        return f"no {os.path.basename(saved_config_path)} beside its checkpoints"
    saved = _flat(OmegaConf.to_container(OmegaConf.load(saved_config_path), resolve=False))
    now = _flat(OmegaConf.to_container(cfg, resolve=True))
    drawn = {"seed"} if now.get("seed") == -1 else set()  # seed=-1 continues the run's own seed
    defaults = dict(_schema_defaults(), **_task_defaults(now.get("task.name")))
    for key in sorted(set(saved) | set(now)):
        if key in CHANGEABLE_ON_RESUME | drawn:
            continue
        if key not in saved and key in defaults and now.get(key) == defaults[key]:
            continue  # a key added since that run was written, left at its default: the run did the same
        if saved.get(key) != now.get(key):
            return f"{key}={saved.get(key)!r} there, {now.get(key)!r} here"
    return None


def _schema_defaults() -> Dict[str, Any]:
    """The dotted keys the schemas give a default (top level and one node down: agent, eval, diagnostics)."""
    import dataclasses
    import typing

    def defaults(cls: Any) -> Dict[str, Any]:
        tree = OmegaConf.to_container(OmegaConf.structured(cls), throw_on_missing=False)
        return {key: value for key, value in _flat(tree).items() if value != "???"}

    found = defaults(Config)
    for name, hint in typing.get_type_hints(Config).items():
        if dataclasses.is_dataclass(hint):
            found.update({f"{name}.{key}": value for key, value in defaults(hint).items()})
    return found


def _task_defaults(task: Any) -> Dict[str, Any]:
    """The dotted task.* keys of the packaged cfg/task/<task>.yaml (a key added there since a run was written,
    e.g. task.mujoco.nconmax, left at its value: that run did the same)."""
    import os

    import isaac_ppo.cfg

    path = os.path.join(os.path.dirname(isaac_ppo.cfg.__file__), "task", f"{task}.yaml")
    if not isinstance(task, str) or not os.path.isfile(path):
        return {}
    return _flat(OmegaConf.to_container(OmegaConf.load(path), resolve=True), "task")


def _flat(tree: Any, prefix: str = "") -> Dict[str, Any]:
    if not isinstance(tree, dict):
        return {prefix: tree}
    flat: Dict[str, Any] = {}
    for key, value in tree.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def budgets(cfg: DictConfig) -> Tuple[Optional[int], Optional[int]]:
    """(max_iterations, max_env_steps). max_iterations null means agent.max_epochs, unless max_env_steps is
    set: then the env steps alone end the run."""
    if cfg.max_iterations is not None:
        return cfg.max_iterations, cfg.max_env_steps
    return (None if cfg.max_env_steps is not None else cfg.agent.max_epochs), cfg.max_env_steps


__all__ = ["CHANGEABLE_ON_RESUME", "Config", "budgets", "load", "resume_mismatch", "typed"]
