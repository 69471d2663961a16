"""Hydra's side of the config: the words a user types turned into Hydra's composition, and Hydra's errors into
one line naming the key.

What lives here: the resolvers the YAML tree uses (${first:}, ${task_budget:}, ${parallel_jobs:},
${fresh_run_dir:}: a run folder claimed atomically), the rewriting of the command line (IsaacGymEnvs' train=,
agent=rl_games, and keys renamed to say their unit, each old name accepted with a note), composition, and the
expansion of a sweep into its jobs so that every job is checked before the first one runs. config.load (the typed,
checked object) is the next step; nothing here builds an env or makes a file but the run folder Hydra asks for.
"""
from __future__ import annotations

import contextlib
import copy
import os
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

CONFIG_MODULE = "isaac_ppo.cfg"

# keys renamed so that an interval says what it counts; the old name still works, with a one-line note
RENAMED = {
    "eval.interval": "eval.interval_env_steps",
    "save_interval": "save_interval_iterations",
    "diagnostics.interval": "diagnostics.interval_iterations",
    "capture_video_freq": "capture_video_interval_iterations",
}


def _first(*values: Any) -> Any:
    """${first:a,b}: the first non-empty value (experiment name, else the task's)."""
    for value in values:
        if value not in (None, ""):
            return value
    return values[-1]


def _task_budget(*, _root_: Any) -> int:
    """${task_budget:}: the task's default env-step budget, numEnvs x horizon x max_epochs (the presets hold
    every run of a comparison to it; max_epochs is IsaacGymEnvs' name for PPO iterations)."""
    return int(_root_.task.env.numEnvs) * int(_root_.agent.horizon) * int(_root_.agent.max_epochs)


def _parallel_jobs(*, _root_: Any) -> int:
    """${parallel_jobs:}: how many jobs the local_parallel launcher runs at once, each with its own threads."""
    from omegaconf import OmegaConf

    from isaac_ppo.distributed import cores

    available = cores()
    physics = int(OmegaConf.select(_root_, "task.mujoco.nthread", default=0) or 0) or available
    return max(1, available // max(int(_root_.torch_threads), physics))


_claimed: Dict[str, str] = {}  # base -> the run directory this process claimed for it
_made_above: List[str] = []  # folders above a claimed run directory that this process made, deepest first


def _fresh_run_dir(base: str) -> str:
    """${fresh_run_dir:BASE}: a run directory no other run has: BASE, or BASE-2, BASE-3, ... when another run
    (started in the same second, say) made it first. Claimed with mkdir, which is atomic, so two runs never
    share one; the same BASE gives this process the same directory however often Hydra resolves it."""
    if base not in _claimed:
        parent = os.path.abspath(os.path.dirname(base) or ".")
        missing = []
        while not os.path.exists(parent):  # (what a refused run removes again: runs_dir, its experiment)
            missing.append(parent)
            parent = os.path.dirname(parent)
        for n in range(1, 10_000):
            candidate = base if n == 1 else f"{base}-{n}"
            os.makedirs(os.path.dirname(base) or ".", exist_ok=True)  # (again: another run's refusal may remove it)
            try:
                os.mkdir(candidate)
            except FileExistsError:
                continue
            _claimed[base] = candidate
            _made_above.extend(p for p in missing if p not in _made_above)
            break
        else:
            raise RuntimeError(f"no free run directory next to {base}")
    return _claimed[base]


def claimed_run_dirs() -> List[str]:
    """The run directories this process claimed (a refused run removes them again)."""
    return list(_claimed.values())


def made_above_run_dirs() -> List[str]:
    """The folders above them that this process made, deepest first (a refused run removes those left empty)."""
    return list(_made_above)


AGENT_DEFAULTS = "agent_defaults"  # an agent YAML's `defaults: [/agent_defaults@_here_, _self_]`: config/schema.py


def register_resolvers() -> None:
    """The resolvers the YAML tree uses, and the agent's defaults (config/schema.py's AgentConfig, each key with its
    default) as a config an agent YAML extends, so that a task's agent YAML holds what the task sets and an
    override of any key (agent.gamma=0.98) finds it."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from isaac_ppo.config.schema import AgentConfig

    for name, resolver in (("first", _first), ("task_budget", _task_budget), ("fresh_run_dir", _fresh_run_dir),
                           ("parallel_jobs", _parallel_jobs)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)
    ConfigStore.instance().store(name=AGENT_DEFAULTS, node=AgentConfig)


def rewrite_argv(argv: List[str]) -> Tuple[List[str], List[str]]:
    """The command line as Hydra reads it, and the notes to print: IsaacGymEnvs' train=NAME is agent=NAME,
    agent=rl_games is the task's PPO values trained by rl-games, and a renamed key's old name is its new one."""
    rewritten, notes = [], []
    for word in argv:
        if word.startswith("train="):  # IsaacGymEnvs calls the agent config group train=
            word = "agent" + word[len("train"):]
        if word == "agent=rl_games":
            word = "agent.backend=rl_games"
        word, note = _renamed(word)
        if note and note not in notes:
            notes.append(note)
        rewritten.append(word)
    return rewritten, notes


def _renamed(word: str) -> Tuple[str, Optional[str]]:
    prefix = word[: len(word) - len(word.lstrip("+~"))]
    key, sep, value = word[len(prefix):].partition("=")
    if key in RENAMED:
        new = RENAMED[key]
        return f"{prefix}{new}{sep}{value}", f"note: {key} is now {new} (the old name still works)"
    return word, None


def compose_config(overrides: List[str]) -> Any:
    """The validated config for overrides, composed as isaac-ppo-train would; mistakes raise UserError."""
    from isaac_ppo.config import load

    overrides, notes = rewrite_argv(list(overrides))
    for note in notes:
        sys.stderr.write(note + "\n")
    return load(compose(overrides))


def compose(overrides: List[str], with_hydra: bool = False) -> Any:
    """Hydra's composition of the config (with its hydra node when asked), errors as one-line UserErrors."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from isaac_ppo.errors import UserError

    register_resolvers()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base=None):
            return hydra_compose(config_name="config", overrides=overrides, return_hydra_config=with_hydra)
    except Exception as error:  # Hydra's composition errors: keep their first line, name the override
        raise UserError(hydra_message(error, lambda key: _keys_without(overrides, key))) from None
    finally:
        GlobalHydra.instance().clear()


@contextlib.contextmanager
def composed_once(single_run: bool) -> Iterator[None]:
    """Within, for a single run (no flag, no hydra.* word but hydra.run.dir), its launch composes the config once:
    a composition is ~0.25 s on 2 cores, and a launch asked for three.
    - The launch's own check (train._prevalidate) and Hydra's run share Hydra's loading of it (the YAML read and
      merged for a config name, overrides and mode): the first is kept and each asker gets a copy. Nothing in it
      depends on when it is asked: its interpolations (${now:}, the run folder's claim) resolve later, on the copy.
    - Hydra's question of the mode (the whole config composed once more to read hydra.mode) has a known answer: no
      config of ours sets hydra.mode, and a single run's words cannot: None, Hydra's own answer for an unset mode
      (the command line's mode, recorded as hydra.mode=RUN in .hydra/hydra.yaml).
    Both are Hydra's private methods, replaced only within, and only where this Hydra has them."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.hydra import Hydra
    from hydra.core.utils import JobRuntime

    load, ask = ConfigLoaderImpl.__dict__.get("load_configuration"), Hydra.__dict__.get("get_mode")
    if not single_run or load is None or ask is None:
        yield
        return
    loaded: Dict[Any, Any] = {}

    def load_once(self: Any, config_name: Optional[str], overrides: List[str], run_mode: Any, from_shell: bool = True,
                  validate_sweep_overrides: bool = True) -> Any:
        key = (config_name, tuple(overrides), run_mode, validate_sweep_overrides)  # (from_shell: error wording)
        name = JobRuntime().get("name")
        if key not in loaded:
            cfg = load(self, config_name, overrides, run_mode, from_shell=from_shell,
                       validate_sweep_overrides=validate_sweep_overrides)
            loaded[key] = (cfg, cfg.hydra.job.name == name)
        cfg, named_by_asker = loaded[key]
        cfg = copy.deepcopy(cfg)  # (the asker changes its copy: Hydra deletes or fills its hydra node)
        if named_by_asker:  # hydra.job.name is the asker's: the compose API's "app", Hydra's main its script's
            cfg.hydra.job.name = name  # (which names the run's log: train.log)
        return cfg

    ConfigLoaderImpl.load_configuration = load_once
    Hydra.get_mode = lambda self, config_name, overrides: None
    try:
        yield
    finally:
        ConfigLoaderImpl.load_configuration, Hydra.get_mode = load, ask


def _keys_without(overrides: List[str], key: str) -> List[str]:
    """Every dotted key of the config composed without the overrides of `key` (none when that fails too)."""
    from omegaconf import OmegaConf

    from isaac_ppo.domains import flat
    from isaac_ppo.errors import UserError

    kept = [word for word in overrides if word.lstrip("+~").partition("=")[0] != key]
    if len(kept) == len(overrides):
        return []
    try:
        return list(flat(OmegaConf.to_container(compose(kept))))
    except UserError:
        return []


def sweep_jobs(overrides: List[str]) -> List[List[str]]:
    """A sweep's distinct jobs, for checking each before the first runs (on SLURM: before anything is queued).
    The jobs are the command line's sweeps crossed with the preset's hydra.sweeper.params (the command line wins
    for a key in both); seeds do not change what is valid, so one seed stands for all."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from isaac_ppo.errors import UserError

    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(overrides)
        fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
        params = _sweeper_params(fixed)
        given = {o.key_or_group for o in parsed}
        axes = [f"{key}={value}" for key, value in params.items() if key not in given]
        jobs = BasicSweeper.split_arguments(parser.parse_overrides(overrides + axes), None)[0]
    except UserError:
        raise
    except Exception as error:  # a sweep Hydra cannot parse: its own first line
        raise UserError(hydra_message(error)) from None
    distinct: List[List[str]] = []
    for job in jobs:
        job = [o for o in job if not o.startswith("seed=")]
        if job not in distinct:
            distinct.append(job)
    return distinct


def _sweeper_params(overrides: List[str]) -> Any:
    """The preset's hydra.sweeper.params (key -> comma-separated values), {} without one."""
    cfg = compose(overrides, with_hydra=True)
    return {str(k): str(v) for k, v in (cfg.hydra.sweeper.params or {}).items()}


def hydra_message(error: Exception, known: Optional[Callable[[str], List[str]]] = None) -> str:
    """Hydra's error as one line naming the override (for a key or a group option that does not exist, the closest
    one: known(key) gives the keys of the config without it)."""
    from isaac_ppo.domains import did_you_mean

    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if "is not in struct" in text or lines[0].startswith("Could not override"):
        key = lines[0].split("'")[1] if "'" in lines[0] else lines[0]
        hint = did_you_mean(key, known(key)) if known else ""
        return f"unknown config key {key!r}{hint}: `isaac-ppo-train --cfg job` lists the keys"
    if "Could not find" in text and "options" in text.lower():
        return _no_such_option(lines)
    return lines[0]


def _no_such_option(lines: List[str]) -> str:
    """Hydra's 'Could not find group/name' with the group's options, and the closest one."""
    import difflib
    import re

    found = re.search(r"Could not find '([^'/]+)/([^']+)'", lines[0])
    start = next((i for i, line in enumerate(lines) if "options" in line.lower()), len(lines) - 1) + 1
    options = []
    for line in lines[start:]:
        if line.startswith("Config search path"):  # what Hydra adds after the options
            break
        options.append(line.strip())
    if not found or not options:
        return " ".join(lines[:2])
    group, name = found.groups()
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.5) or [
        o for o in options if o.lower() == name.lower()]
    hint = f"did you mean {group}={close[0]}? " if close else ""
    return f"{group}={name} does not exist: {hint}({group} options: {', '.join(options)})"
