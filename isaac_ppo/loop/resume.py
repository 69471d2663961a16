"""Resume, in one place: which run a launch continues, whether it may continue it, and what may change on the way.

A run continues only its own work: resume=PATH names a checkpoint; resume=auto takes the newest last.pt of this
experiment whose config.yaml is this config (but for CHANGEABLE_ON_RESUME); a launch into a folder that holds a
run (a requeued SLURM job, a pinned hydra.run.dir) continues it in place when the config is that run's, and is
refused otherwise. A checkpoint is refused before any of it is loaded when it cannot be continued here (the policy
alone, another task's, another number of ranks). The runner restores the state itself (Runner.resume).
"""
from __future__ import annotations

import glob
import os
from typing import Any, Callable, Dict, Mapping, Optional

from omegaconf import DictConfig, OmegaConf

from isaac_ppo.config.compose import RENAMED
from isaac_ppo.domains import flat as _flat
from isaac_ppo.errors import UserError

# what a resumed run may change without becoming another run: budgets, saving, threads, where files go, play,
# what is measured (the training-return window starts anew when its size changes). mujoco.batch's thread count is
# a machine setting: every env steps alone, so the physics is bit for bit the same at any count (a cut study run
# relaunched pinned to one core, docs/studies.md, continues)
CHANGEABLE_ON_RESUME = frozenset({
    "resume", "checkpoint", "max_iterations", "max_env_steps", "save_interval_iterations", "torch_threads",
    "collect_torch_threads", "task.mujoco.nthread", "headless", "test", "play_episodes", "capture_video", "runs_dir",
    "diagnostics.plot", "max_diverged_fraction", "eval.interval_env_steps", "eval.final", "eval.stochastic",
    "save_probe_set", "diagnostics.probe_set", "agent.games_to_track", "capture_video_interval_iterations",
    "capture_video_len", "wandb_activate", "wandb_project", "wandb_entity", "wandb_group", "wandb_name", "wandb_tags",
    "wandb_logcode_dir", "wandb_logcode",
})


def resume_point(cfg: Any, run_dir: str) -> Optional[str]:
    """The checkpoint this run continues from, if any: resume=PATH; resume=auto, the newest last.pt of a run of
    this experiment whose config is this one (but for the keys a resume may change); or, with neither, this
    directory's own last.pt (a requeued SLURM job or a pinned hydra.run.dir), when its config is this one."""
    if cfg.resume == "auto":
        return newest_matching_last(cfg.runs_dir, cfg.experiment or cfg.task.name,
                                    lambda saved: resume_mismatch(saved, cfg))
    if cfg.resume:
        return cfg.resume
    in_place = os.path.join(run_dir, "checkpoints", "last.pt")
    if not os.path.exists(in_place):
        return None
    # starting over would overwrite this directory's checkpoints; continuing another config would mislabel them
    check_pinned_run_dir(cfg, run_dir)
    return in_place


def check_pinned_run_dir(cfg: Any, run_dir: str) -> None:
    """A run started in a directory holding a run continues it only when its config is that run's."""
    if cfg.test or not any(os.path.exists(os.path.join(run_dir, name))
                           for name in ("config.yaml", os.path.join("checkpoints", "last.pt"))):
        return
    mismatch = resume_mismatch(os.path.join(run_dir, "config.yaml"), cfg)
    if mismatch:
        raise UserError(f"{run_dir} holds another run ({mismatch}): give it its own hydra.run.dir, or start it "
                        "again with that run's values to continue it")


def resume_mismatch(saved_config_path: str, cfg: DictConfig) -> Optional[str]:
    """Why the run whose config.yaml is at saved_config_path is not this config's run (the first key that
    differs, with both values), or None when it is. A run written before a key was renamed reads as the same run."""
    if not os.path.isfile(saved_config_path):
        return f"no {os.path.basename(saved_config_path)} beside its checkpoints"
    saved = _flat(OmegaConf.to_container(OmegaConf.load(saved_config_path), resolve=False))
    saved = {RENAMED.get(key, key): value for key, value in saved.items()}
    now = _flat(OmegaConf.to_container(cfg, resolve=True))
    drawn = {"seed"} if now.get("seed") == -1 else set()  # seed=-1 continues the run's own seed
    defaults = dict(_schema_defaults(), **_task_defaults(now.get("task.name")))
    for key in sorted(set(saved) | set(now)):
        if key in CHANGEABLE_ON_RESUME | drawn:
            continue
        # a key added since that run was written: the run did what its default does (a key is added with the
        # default that keeps the old behaviour), so a task that sets it otherwise is another run
        there = saved[key] if key in saved else defaults.get(key)
        if there != now.get(key):
            return f"{key}={there!r} there, {now.get(key)!r} here"
    return None


def newest_matching_last(runs_dir: str, experiment: str, mismatch: Callable[[str], Optional[str]]) -> str:
    """resume=auto: the most recently written last.pt of this experiment's runs whose config.yaml `mismatch`
    accepts (returns None for); a one-line refusal naming the newest candidate's difference otherwise."""
    pattern = os.path.join(runs_dir, experiment, "*", "checkpoints", "last.pt")
    candidates = sorted(glob.glob(pattern), key=os.path.getmtime, reverse=True)
    if not candidates:
        raise UserError(f"resume=auto found no {pattern}: give resume=PATH or start a new run")
    reasons = []
    for path in candidates:
        reason = mismatch(os.path.join(os.path.dirname(os.path.dirname(path)), "config.yaml"))
        if reason is None:
            return path
        reasons.append(reason)
    raise UserError(f"resume=auto found {len(candidates)} run(s) of {experiment}, none with this config (the newest: "
                    f"{reasons[0]}): give resume=PATH or start a new run")


def check_resumable(state: Mapping[str, Any], path: str, task: str, env: Any, world_size: int) -> None:
    """Refuse, in one line, a checkpoint this run cannot continue: the policy alone, another task's, or one
    written by another number of ranks."""
    if "ppo" not in state:
        raise UserError(f"checkpoint {path} holds the policy alone (best.pt): resume from last.pt or iter_*.pt")
    if (state["num_obs"], state["num_actions"]) != (env.num_obs, env.num_actions):
        raise UserError(f"checkpoint {path} is for {state['task']} (obs {state['num_obs']}, actions "
                        f"{state['num_actions']}), not {task}: resume with task={state['task']}")
    from isaac_ppo.envs.contract import num_states  # (not at the top: the CLI's refusals import this module, and
    # the contract imports torch, a second and a half they need not spend)

    saved_states, states = int(state.get("num_states", 0)), num_states(env)
    if saved_states != states:
        raise UserError(f"checkpoint {path} was trained with {saved_states} critic observations, this run's env "
                        f"gives {states}: resume with asymmetric={str(bool(saved_states)).lower()}")
    saved_world = state.get("world_size", 1)
    if saved_world != world_size:
        raise UserError(f"checkpoint {path} was written by {saved_world} rank(s) and this run has {world_size}: "
                        f"resume with {saved_world} process(es) (torchrun --nproc_per_node)")


def how_to_continue(cfg: Any, run_dir: str, last: str) -> str:
    """What to type to continue a stopped run: `isaac-ppo-train resume=RUN_DIR` continues it in place from its
    folder alone (its recorded command line; train.py); a multi-GPU run, the same torchrun command with it. Also:
    resume=auto with the same command (runs in runs_dir/<experiment>/), or resume=<its last.pt>."""
    if not os.path.isfile(os.path.join(run_dir, ".hydra", "overrides.yaml")):  # (Hydra's record: not written here)
        return f"the same command and resume={last}"
    if cfg.multi_gpu:
        return f"the same torchrun command with only resume={run_dir} after isaac_ppo.train"
    return f"`isaac-ppo-train resume={run_dir}`"


def _schema_defaults() -> Dict[str, Any]:
    """The dotted keys the schemas give a default (top level and one node down: agent, eval, diagnostics)."""
    import dataclasses
    import typing

    from isaac_ppo.config.schema import Config

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
    from isaac_ppo.config.files import cfg_dir

    path = os.path.join(cfg_dir("task"), f"{task}.yaml")
    if not isinstance(task, str) or not os.path.isfile(path):
        return {}
    return _flat(OmegaConf.to_container(OmegaConf.load(path), resolve=True), "task")
