"""The Isaac Gym backend: IsaacGymEnvs' VecTask behind the VecEnv contract.

Kept thin on purpose: Isaac Gym only runs on NVIDIA GPUs with Python 3.8 (our docker/ image), so everything
here is what can be checked against the VecTask contract without it.

Semantics the adapter passes through unchanged, and what differs from the MuJoCo ports:
- IsaacGymEnvs resets an ended env inside the *next* step, so the observation returned with a reset flag is
  the terminal one. No ``extras["final_obs"]`` is given, so the collector bootstraps a time-out with the critic
  value it computes for that observation at the next step anyway (no extra critic pass per step), and the
  transition after it (physics from the terminal state, then the reset) is one wasted sample per episode.
- Resets arrive as IsaacGymEnvs' long tensor and are returned as bool.
- Critic observations: a VecTask with ``num_states`` > 0 (IsaacGymEnvs' asymmetric tasks, e.g. ShadowHand with
  ``env.asymmetric_observations``) returns ``"states"`` in its observation dicts; the adapter passes them on (the
  active rows), as the contract's critic observations.
- ``set_active(n)``: an Isaac Gym sim is a fixed pool, so every env is still simulated (at full cost); the
  envs past n get zero actions and are left out of what step returns.
- Task parameters come from IsaacGymEnvs' own task config (same key names and defaults as cfg/task here),
  composed as IsaacGymEnvs composes it, with every task.* value the user changed here forwarded onto it
  (``mujoco.*`` is the MuJoCo port's own and stays here), and IsaacGymEnvs' device keys (sim_device, pipeline,
  graphics_device_id, headless, force_render) passed through.
"""
from __future__ import annotations

import importlib.util
import sys
import json
import os
from typing import Any, Dict, List, Optional

import torch

from isaac_ppo.envs.contract import StepResult, check_actions, check_active
from isaac_ppo.errors import UserError

INSTALL_HINT = (
    "sim=isaacgym needs NVIDIA Isaac Gym Preview 4 (a tarball from NVIDIA, Python 3.8 only, not on PyPI) and "
    "IsaacGymEnvs: use the GPU image in docker/ (see its README), or run with sim=mujoco"
)
ORDER_HINT = (
    "Isaac Gym refuses to load after torch: start from the isaac-ppo console scripts (they import it first) "
    "or put `import isaacgym` before `import torch` in your script"
)


def available() -> bool:
    """Whether Isaac Gym is loaded (isaac_ppo.preload) and a CUDA device exists: what sim=auto asks."""
    return "isaacgym" in sys.modules and torch.cuda.is_available()


def make_env(task: str, num_envs: int, seed: int, device: str, task_changes: Optional[Dict[str, Any]] = None,
             options: Optional[Dict[str, Any]] = None) -> "IsaacGymVecEnv":
    """Build task through isaacgymenvs.make: the learner's tensors on device; task_changes (dotted task keys ->
    values) onto IsaacGymEnvs' own task config; options: IsaacGymEnvs' sim_device (default: device), pipeline
    (default: its own), graphics_device_id (default: -1 headless, else 0), headless (default true),
    force_render (default false)."""
    if "isaacgym" not in sys.modules:
        if importlib.util.find_spec("isaacgym") is None:
            raise UserError(INSTALL_HINT)
        raise UserError(ORDER_HINT)
    if importlib.util.find_spec("isaacgymenvs") is None:
        raise UserError(INSTALL_HINT)
    import isaacgymenvs

    options = {k: v for k, v in (options or {}).items() if v is not None}
    sim_device = options.get("sim_device") or device
    headless = options.get("headless", True)
    cfg = isaacgymenvs_config(os.path.join(os.path.dirname(isaacgymenvs.__file__), "cfg"), task, num_envs,
                              sim_device, device, options.get("pipeline"), task_changes or {})
    vectask = isaacgymenvs.make(
        seed=seed,
        task=task,
        num_envs=num_envs,
        sim_device=sim_device,
        rl_device=device,
        graphics_device_id=options.get("graphics_device_id", -1 if headless else 0),
        headless=headless,
        force_render=options.get("force_render", False),
        cfg=cfg,
    )
    return IsaacGymVecEnv(vectask)


def isaacgymenvs_config(cfg_dir: str, task: str, num_envs: int, sim_device: str, rl_device: str,
                        pipeline: Optional[str], task_changes: Dict[str, Any]) -> Any:
    """IsaacGymEnvs' config (its cfg/config.yaml, task=<task>), composed as its own make() composes it, with the
    devices and every changed task value as overrides (so its interpolations, e.g. use_gpu_pipeline from
    pipeline, see them)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    words = [f"task={task}", f"num_envs={num_envs}", f"task.env.numEnvs={num_envs}", f"sim_device={sim_device}",
             f"rl_device={rl_device}"] + ([f"pipeline={pipeline}"] if pipeline else [])
    words += [f"task.{key}={_hydra_value(value)}" for key, value in sorted(task_changes.items())]
    GlobalHydra.instance().clear()  # (as IsaacGymEnvs' make does: ours composed the run's config before)
    try:
        with initialize_config_dir(config_dir=cfg_dir, version_base=None):
            return compose(config_name="config", overrides=words)
    except Exception as error:  # a key IsaacGymEnvs' task does not have, say: its first line
        first = str(error).strip().splitlines()[0]
        raise UserError(f"IsaacGymEnvs' config for {task} refused {' '.join(words[5:]) or 'it'}: {first}") from None
    finally:
        GlobalHydra.instance().clear()


def _hydra_value(value: Any) -> str:
    """A value as a Hydra override writes it (JSON's forms are Hydra's for numbers, lists and dicts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if value is None:
        return "null"
    return json.dumps(value)


def changed_leaves(given: Any, defaults: Any, prefix: str = "") -> Dict[str, Any]:
    """The dotted keys whose value in `given` differs from (or is absent in) `defaults` (plain nested dicts)."""
    changed: Dict[str, Any] = {}
    for key, value in given.items():
        name = f"{prefix}{key}"
        default = defaults.get(key) if isinstance(defaults, dict) else None
        if isinstance(value, dict):
            changed.update(changed_leaves(value, default if isinstance(default, dict) else {}, name + "."))
        elif value != default or not isinstance(defaults, dict) or key not in defaults:
            changed[name] = value
    return changed


__all__: List[str] = ["IsaacGymVecEnv", "available", "changed_leaves", "isaacgymenvs_config", "make_env"]


class IsaacGymVecEnv:
    """VecEnv contract over an IsaacGymEnvs VecTask (num_envs, num_obs, num_acts, rl_device, reset, step)."""

    def __init__(self, vectask: Any):
        self.vectask = vectask
        self.num_envs = int(vectask.num_envs)
        self.num_obs = int(vectask.num_obs)
        self.num_actions = int(vectask.num_acts)
        self.device = torch.device(vectask.rl_device)
        self.max_episode_length = int(vectask.max_episode_length)
        self.num_states = int(getattr(vectask, "num_states", 0) or 0)  # IsaacGymEnvs' critic observations
        self.active = self.num_envs
        self._last = None  # the whole pool's observation dict, for set_active

    def _rows(self, obs_dict: Dict[str, torch.Tensor], n: int) -> Dict[str, torch.Tensor]:
        out = {"obs": obs_dict["obs"][:n]}
        if self.num_states:
            out["states"] = obs_dict["states"][:n]
        return out

    def reset(self) -> Dict[str, torch.Tensor]:
        self._last = self.vectask.reset()
        return self._rows(self._last, self.active)

    def set_active(self, n: int) -> Dict[str, torch.Tensor]:
        self.active = check_active(n, self.num_envs)
        if self._last is None:
            return self.reset()
        return self._rows(self._last, n)

    def step(self, actions: torch.Tensor) -> StepResult:
        n = self.active
        # Isaac Gym's tensor API takes float32 only
        actions = check_actions(actions, n, self.num_actions).to(self.device, torch.float32)
        if n < self.num_envs:
            padded = torch.zeros(self.num_envs, self.num_actions, device=self.device, dtype=actions.dtype)
            padded[:n] = actions
            actions = padded
        obs_dict, rewards, resets, extras = self.vectask.step(actions)
        self._last = obs_dict
        # per-env extras cover the whole pool: hand back the active rows only
        out_extras = {
            key: value[:n] if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == self.num_envs
            else value
            for key, value in extras.items()
        }
        out_extras["time_outs"] = extras["time_outs"][:n].to(torch.bool)
        return self._rows(obs_dict, n), rewards[:n], resets[:n].to(torch.bool), out_extras
