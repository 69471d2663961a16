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

_loaded: Dict[str, DictConfig] = {}  # repr(resolved config) -> its typed, checked config (this process's launches)


def load(composed: Any) -> DictConfig:
    """The typed, checked config of Hydra's composition; a mistake raises UserError naming the key."""
    resolved = OmegaConf.to_container(composed, resolve=True) if not isinstance(composed, dict) else composed
    key = repr(resolved)  # (exact for plain containers, and ~100x cheaper than YAML: the config fuzzer loads 2k)
    if key not in _loaded:
        from isaac_ppo.config import isaacgymenvs
        from isaac_ppo.config.checks import check  # (it imports the scheduler package, which reads configs)

        cfg = typed(isaacgymenvs.translate(resolved))
        check(cfg)
        _loaded.clear()  # one launch at a time: keep only the newest
        _loaded[key] = cfg
    return _loaded[key]


def budgets(cfg: DictConfig) -> Tuple[Optional[int], Optional[int]]:
    """(max_iterations, max_env_steps). max_iterations null means agent.max_epochs (IsaacGymEnvs' name, which
    counts PPO iterations, not epochs over a batch: agent.mini_epochs are those), unless max_env_steps is set:
    then the env steps alone end the run."""
    if cfg.max_iterations is not None:
        return cfg.max_iterations, cfg.max_env_steps
    return (None if cfg.max_env_steps is not None else cfg.agent.max_epochs), cfg.max_env_steps


__all__ = ["Config", "budgets", "load", "typed"]
