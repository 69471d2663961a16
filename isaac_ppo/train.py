"""The isaac-ppo-train command (also python -m isaac_ppo.train): compose the config, load it, build, run.

  isaac-ppo-train task=Ant num_envs=4096 seed=1 max_iterations=500 sim=mujoco
  isaac-ppo-train task=Ant test=true checkpoint=runs/Ant/<date>/checkpoints/best.pt

Mistakes (unknown key, wrong type, missing checkpoint, Isaac Gym not installed, ...) end with one line on
stderr and exit status 2, before a run directory is made where that can be known in advance.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional

from isaac_ppo import preload, usage

CONFIG_MODULE = "isaac_ppo.cfg"
# exit statuses: 0 the run finished, 2 bad input (one line), STOPPED a stop signal ended it early with last.pt
# saved (resume=auto continues it; EX_TEMPFAIL of sysexits.h), 1 anything else (a bug: its traceback)
STOPPED = 75
_stopped_by: List[str] = []  # the signals that stopped this process's runs early


def _first(*values: Any) -> Any:
    """${first:a,b}: the first non-empty value (experiment name, else the task's)."""
    for value in values:
        if value not in (None, ""):
            return value
    return values[-1]


def _task_budget(*, _root_: Any) -> int:
    """${task_budget:}: the task's default env-step budget, numEnvs x horizon x max_epochs (the presets hold
    every run of a comparison to it)."""
    return int(_root_.task.env.numEnvs) * int(_root_.agent.horizon) * int(_root_.agent.max_epochs)


def _parallel_jobs(*, _root_: Any) -> int:
    """${parallel_jobs:}: how many jobs the local_parallel launcher runs at once, each with its own threads."""
    from omegaconf import OmegaConf

    from isaac_ppo.build import cores

    cores = cores()
    physics = int(OmegaConf.select(_root_, "task.mujoco.nthread", default=0) or 0) or cores
    return max(1, cores // max(int(_root_.torch_threads), physics))


_claimed: Dict[str, str] = {}  # base -> the run directory this process claimed for it


def _fresh_run_dir(base: str) -> str:
    """${fresh_run_dir:BASE}: a run directory no other run has: BASE, or BASE-2, BASE-3, ... when another run
    (started in the same second, say) made it first. Claimed with mkdir, which is atomic, so two runs never
    share one; the same BASE gives this process the same directory however often Hydra resolves it."""
    if base not in _claimed:
        os.makedirs(os.path.dirname(base) or ".", exist_ok=True)
        for n in range(1, 10_000):
            candidate = base if n == 1 else f"{base}-{n}"
            try:
                os.mkdir(candidate)
            except FileExistsError:
                continue
            _claimed[base] = candidate
            break
        else:
            raise RuntimeError(f"no free run directory next to {base}")
    return _claimed[base]


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("first"):
        OmegaConf.register_new_resolver("first", _first)
    if not OmegaConf.has_resolver("task_budget"):
        OmegaConf.register_new_resolver("task_budget", _task_budget)
    if not OmegaConf.has_resolver("fresh_run_dir"):
        OmegaConf.register_new_resolver("fresh_run_dir", _fresh_run_dir)
    if not OmegaConf.has_resolver("parallel_jobs"):
        OmegaConf.register_new_resolver("parallel_jobs", _parallel_jobs)


def _fail(message: str) -> None:
    sys.stderr.write(f"isaac-ppo-train: {message}\n")
    sys.exit(2)


def _sim_choice(argv: List[str]) -> str:
    """The sim= Hydra will use: the last one given."""
    choices = [word[4:] for word in argv if word.startswith("sim=")]
    return choices[-1] if choices else "auto"


def compose_config(overrides: List[str]) -> Any:
    """The validated config for overrides, composed as isaac-ppo-train would; mistakes raise UserError."""
    from isaac_ppo.config import load

    return load(_compose(overrides))


def _compose(overrides: List[str], with_hydra: bool = False) -> Any:
    """Hydra's composition of the config (with its hydra node when asked), errors as one-line UserErrors."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from isaac_ppo.errors import UserError

    _register_resolvers()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base=None):
            return compose(config_name="config", overrides=overrides, return_hydra_config=with_hydra)
    except Exception as error:  # Hydra's composition errors: keep their first line, name the override
        raise UserError(_hydra_message(error)) from None
    finally:
        GlobalHydra.instance().clear()


def _prevalidate(overrides: List[str], pinned_run_dir: Optional[str] = None) -> None:
    """Refuse mistakes before Hydra makes a run directory, or writes its .hydra/ record into a pinned one (a
    hydra.run.dir holding another run's files)."""
    from isaac_ppo.errors import UserError

    try:
        cfg = compose_config(overrides)
        if pinned_run_dir is not None:
            _check_pinned_run_dir(cfg, pinned_run_dir)
    except UserError as error:
        _fail(str(error))


def _prevalidate_sweep(overrides: List[str]) -> None:
    """Refuse a sweep with a bad job before the first job runs (on SLURM: before anything is queued). The jobs
    are the command line's sweeps crossed with the preset's hydra.sweeper.params (the command line wins for a
    key in both); seeds do not change what is valid, so one seed stands for all."""
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
    except UserError as error:
        _fail(str(error))
    except Exception as error:  # a sweep Hydra cannot parse: its own first line
        _fail(_hydra_message(error))
    seen = set()
    for job in jobs:
        job = [o for o in job if not o.startswith("seed=")]
        if tuple(job) not in seen:
            seen.add(tuple(job))
            _prevalidate(job)


def _sweeper_params(overrides: List[str]) -> Any:
    """The preset's hydra.sweeper.params (key -> comma-separated values), {} without one."""
    cfg = _compose(overrides, with_hydra=True)
    return {str(k): str(v) for k, v in (cfg.hydra.sweeper.params or {}).items()}


def _hydra_message(error: Exception) -> str:
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if "is not in struct" in text or lines[0].startswith("Could not override"):
        key = lines[0].split("'")[1] if "'" in lines[0] else lines[0]
        return f"unknown config key {key!r}: see `isaac-ppo-train --cfg job` for the keys (a new key needs +{key}=...)"
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


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(usage.HELP)
        return
    if "--version" in argv:
        print(usage.version())
        return
    # IsaacGymEnvs calls the agent config group train=: the same here (train=AntPPO is agent=AntPPO)
    argv = ["agent" + a[len("train"):] if a.startswith("train=") else a for a in argv]
    # agent=rl_games: the task's PPO values (agent=${task}PPO) trained by rl-games instead of our learner
    argv = ["agent.backend=rl_games" if a == "agent=rl_games" else a for a in argv]
    if _sim_choice(argv) in ("auto", "isaacgym"):
        preload.isaacgym_first()  # before anything imports torch
    if any(a.lower() == "capture_video=true" for a in argv):
        from isaac_ppo.video import gl_backend  # (imports neither torch nor mujoco)

        # MuJoCo picks its OpenGL backend when imported: headless EGL on GPU nodes, OSMesa on CPUs
        devices = [a[len("device="):] for a in argv if a.startswith("device=")]
        os.environ["MUJOCO_GL"] = gl_backend(devices[-1] if devices else "cpu")
    _register_resolvers()
    plain = [a for a in argv if "=" in a and not a.startswith(("-", "hydra.", "hydra/", "+hydra"))]
    flags = [a for a in argv if a.startswith("-")]
    pinned = [a.split("=", 1)[1] for a in argv if a.startswith("hydra.run.dir=")]
    if not flags and all(a in plain or a.startswith("hydra.run.dir=") for a in argv):  # a single run: check it
        _prevalidate(plain, pinned[-1] if pinned else None)
    elif flags in (["-m"], ["--multirun"]):  # every job of a sweep, before any is launched or queued
        _prevalidate_sweep(plain)
    scratch = None
    if "multi_gpu=true" in argv and int(os.environ.get("RANK", "0")) > 0:
        scratch = _scratch_dir()
        argv += [f"hydra.run.dir={scratch}", "hydra.output_subdir=null", "hydra/job_logging=disabled",
                 "hydra/hydra_logging=disabled"]
    sys.argv = [sys.argv[0]] + argv
    try:
        _hydra_entry()
    finally:
        if scratch is not None and not os.listdir(scratch):
            os.rmdir(scratch)
    if _stopped_by:
        sys.exit(STOPPED)


def _scratch_dir() -> str:
    """Ranks other than 0 write nothing into the run directory: Hydra's own folder for them is an empty scratch
    one (each rank would resolve ${now:} itself), and the run directory they use is rank 0's (broadcast in run)."""
    import tempfile

    return tempfile.mkdtemp(prefix=f"isaac-ppo-rank{os.environ['RANK']}-")


def _hydra_entry() -> None:
    import hydra

    @hydra.main(config_path="pkg://" + CONFIG_MODULE, config_name="config", version_base=None)
    def _run(cfg: Any) -> Any:
        from isaac_ppo.errors import RunFailure, UserError

        _quiet_third_party_loggers()
        try:
            return run(cfg)
        except UserError as error:
            _remove_unused_run_dir()
            _fail(str(error))
        except RunFailure as error:  # what ran is kept; the message says what was saved
            sys.stderr.write(f"isaac-ppo-train: {error}\n")
            sys.exit(1)

    _run()


def _quiet_third_party_loggers() -> None:
    """Hydra's job logging shows INFO on the console: what the libraries we use say at that level (OpenGL's
    accelerate module, matplotlib's font cache) is not for the user; their warnings still show."""
    import logging

    for name in ("OpenGL", "matplotlib", "PIL", "numexpr"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _remove_unused_run_dir() -> None:
    """A run refused after Hydra made its directory leaves no folder behind: the directories this process
    claimed are removed when they hold nothing of a run (Hydra's .hydra/ and an empty or unused train.log)."""
    import shutil

    for run_dir in _claimed.values():
        names = set(os.listdir(run_dir)) if os.path.isdir(run_dir) else {"?"}
        if names <= {".hydra", "train.log"}:
            shutil.rmtree(run_dir, ignore_errors=True)


def run(cfg: Any, run_dir: Optional[str] = None) -> Any:
    """Build the env and the runner from a composed config and train (or play when test=true) into run_dir
    (Hydra's run directory when not given); with multi_gpu=true this process is one rank of the run."""
    from isaac_ppo import config, distributed

    cfg = config.load(cfg)  # (already checked before Hydra made the run directory: not checked again)
    comm, device = distributed.setup(cfg.multi_gpu, cfg.device, cfg.dist_backend)
    try:
        result = _train_or_play(cfg, comm, device, run_dir)
    except BaseException:
        comm.close(finished=False)
        raise
    comm.close()
    return result


def _train_or_play(cfg: Any, comm: Any, device: str, run_dir: Optional[str]) -> Any:
    from hydra.core.hydra_config import HydraConfig

    from isaac_ppo.build import build_env_and_scheduler, build_runner
    from isaac_ppo.config.isaacgymenvs import isaacgymenvs_keys_at_start
    from isaac_ppo.errors import UserError
    from isaac_ppo.io.logger import write_config

    if run_dir is None:
        run_dir = HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else os.getcwd()
    run_dir = comm.broadcast_object(run_dir)  # rank 0's: every rank reads from it (resume), rank 0 writes
    # (what to resume is decided before the env is built: a refusal costs nothing)
    resume_from = None if cfg.test or cfg.agent.backend == "rl_games" else resume_point(cfg, run_dir)
    cfg = isaacgymenvs_keys_at_start(cfg, comm, resume_from)
    env, scheduler = build_env_and_scheduler(cfg, rank=comm.rank, local_ranks=comm.local_world_size, device=device)

    if cfg.test:
        from isaac_ppo.evaluate import describe
        from isaac_ppo.play import play

        video = os.path.join(run_dir, "play.mp4") if cfg.capture_video else None
        result = play(cfg, env, cfg.checkpoint, video)
        if cfg.wandb_activate:
            from isaac_ppo.io import wandb_sink

            wandb_sink.log_play(cfg, run_dir, result)
        print(f"[{cfg.task.name}] {result['episodes']} episodes (one per env, from reset): {describe(result)}, "
              f"mean length {result['length_mean']:.1f}")
        if video:
            print(f"[{cfg.task.name}] video of env 0 ({result['frames']} frames): {video}")
        if cfg.save_probe_set:
            print(f"[{cfg.task.name}] probe set: {result['probe_states']} of the {result['states_played']:,} "
                  f"observations played, in {cfg.save_probe_set} (use it with "
                  f"diagnostics.probe_set={cfg.save_probe_set})")
        return result

    if cfg.agent.backend == "rl_games":  # the same task, env and values, rl-games' learner
        from isaac_ppo.rlgames import train_with_rl_games

        summary = train_with_rl_games(cfg, env, run_dir)
        if summary.get("stopped_by"):  # not finished (so not 0) and not resumable here (so not STOPPED)
            sys.stderr.write(f"isaac-ppo-train: stopped early by {summary['stopped_by']}: rl-games runs cannot be "
                             f"resumed here, start it again (its files are in {run_dir})\n")
            sys.exit(1)
        return summary
    runner = build_runner(cfg, env, run_dir, scheduler, comm=comm, device=device)
    if resume_from and not runner.resume(resume_from):
        finished = f"{resume_from} is of a finished run ({runner.iteration} iterations, {runner.env_steps:,} env steps)"
        if os.path.dirname(os.path.dirname(os.path.abspath(resume_from))) != os.path.abspath(run_dir):
            raise UserError(f"{finished}: raise max_iterations or max_env_steps to continue it")
        if comm.is_main:  # the same command again in its own folder (a requeue after the end): nothing to do
            print(f"[{cfg.task.name}] {finished}: nothing to do; results in {run_dir}")
        return None
    if cfg.checkpoint and not resume_from:
        from isaac_ppo.io.checkpoint import load, load_model

        load_model(runner.model, load(cfg.checkpoint, device), cfg.checkpoint)
    if comm.is_main and not os.path.exists(os.path.join(run_dir, "config.yaml")):
        # written once (a run resumed in place keeps the record of what it is), with the checkpoint it continues:
        # the report joins a run resumed into a new folder to the one it continues
        write_config(run_dir, cfg, resumed_from=os.path.abspath(resume_from) if resume_from else None)
    if comm.is_main:
        ranks = f" on each of {comm.world_size} ranks ({comm.backend})" if comm.world_size > 1 else ""
        print(f"[{cfg.task.name}] training on {type(env).__module__.split('.')[-1]} with {env.num_envs} envs"
              f"{ranks}; results in {run_dir}")
    summary = runner.run()
    _report_end(cfg, summary, run_dir, comm.is_main)
    return summary


def _check_pinned_run_dir(cfg: Any, run_dir: str) -> None:
    """A run started in a directory holding a run continues it only when its config is that run's."""
    from isaac_ppo.config import resume_mismatch
    from isaac_ppo.errors import UserError

    if cfg.test or not any(os.path.exists(os.path.join(run_dir, name))
                           for name in ("config.yaml", os.path.join("checkpoints", "last.pt"))):
        return
    mismatch = resume_mismatch(os.path.join(run_dir, "config.yaml"), cfg)
    if mismatch:
        raise UserError(f"{run_dir} holds another run ({mismatch}): give it its own hydra.run.dir, or start it "
                        "again with that run's values to continue it")


def resume_point(cfg: Any, run_dir: str) -> Optional[str]:
    """The checkpoint this run continues from, if any: resume=PATH; resume=auto, the newest last.pt of a run of
    this experiment whose config is this one (but for the keys a resume may change); or, with neither, this
    directory's own last.pt (a requeued SLURM job or a pinned hydra.run.dir), when its config is this one."""
    from isaac_ppo.config import resume_mismatch
    from isaac_ppo.io.checkpoint import newest_matching_last

    if cfg.resume == "auto":
        return newest_matching_last(cfg.runs_dir, cfg.experiment or cfg.task.name,
                                    lambda saved: resume_mismatch(saved, cfg))
    if cfg.resume:
        return cfg.resume
    in_place = os.path.join(run_dir, "checkpoints", "last.pt")
    if not os.path.exists(in_place):
        return None
    # starting over would overwrite this directory's checkpoints; continuing another config would mislabel them
    _check_pinned_run_dir(cfg, run_dir)
    return in_place


def _how_to_continue(cfg: Any, run_dir: str, last: str) -> str:
    """resume=PATH always continues a run; resume=auto finds only runs in runs_dir/<experiment>/; the same
    command continues a folder of its own (hydra.run.dir) in place, unless it says resume= (which wins) or is a
    sweep (-m: that starts a new one)."""
    from hydra.core.hydra_config import HydraConfig

    mode = getattr(HydraConfig.get(), "mode", None) if HydraConfig.initialized() else None
    multirun = getattr(mode, "name", "") == "MULTIRUN"
    auto_dir = os.path.join(cfg.runs_dir, cfg.experiment or cfg.task.name)
    if os.path.abspath(os.path.dirname(run_dir)) == os.path.abspath(auto_dir) and not multirun:
        return f"resume=auto (or resume={last})"
    if cfg.resume or multirun:
        return f"resume={last}"
    return f"the same command (hydra.run.dir={run_dir} continues in place) or resume={last}"


def _report_end(cfg: Any, summary: Any, run_dir: str, main: bool) -> None:
    """The last line: done, or stopped early (then the process exits with STOPPED)."""
    stopped_by = summary.get("stopped_by") if summary else None
    if stopped_by:
        _stopped_by.append(stopped_by)
        if main:
            print(f"[{cfg.task.name}] stopped early by {stopped_by}: continue it with "
                  f"{_how_to_continue(cfg, run_dir, summary.get('last_checkpoint'))}; exit status {STOPPED}")
    elif main:
        diverged = f"; {summary['diverged']:,} episodes ended by a diverged simulation" if summary.get("diverged") else ""
        from isaac_ppo.evaluate import describe_run

        print(f"[{cfg.task.name}] done: {describe_run(summary, cfg.agent.games_to_track)}{diverged}; "
              f"results in {run_dir}")


if __name__ == "__main__":
    main()
