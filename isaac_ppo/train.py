"""The isaac-ppo-train command (also python -m isaac_ppo.train): read the command line, compose and check the
config, then train, play (test=true) or hand the run to rl-games; the exit status says how it ended.

  isaac-ppo-train task=Ant num_envs=4096 seed=1 max_iterations=500 sim=mujoco
  isaac-ppo-train task=Ant test=true checkpoint=runs/Ant/<date>/checkpoints/best.pt

Mistakes (unknown key, wrong type, missing checkpoint, Isaac Gym not installed, ...) end with one line on
stderr and exit status 2, before a run directory is made where that can be known in advance. Composition lives
in config/compose.py, resume in loop/resume.py; this module only orders the steps.
"""
from __future__ import annotations

import os
import sys
from typing import Any, List, Optional

from isaac_ppo import preload, usage
from isaac_ppo.loop.stops import STOPPED

_stopped_by: List[str] = []  # the signals that stopped this process's runs early


def _fail(message: str) -> None:
    sys.stderr.write(f"isaac-ppo-train: {message}\n")
    sys.exit(2)


# Hydra's modes, of which a command line takes one (Hydra itself answers two with a traceback)
MODES = {"--run": "-r", "--multirun": "-m", "--cfg": "-c", "--info": "-i", "--shell-completion": "-sc"}


def _check_one_mode(argv: List[str]) -> None:
    given = [long for long, short in MODES.items() if any(a in (long, short) or a.startswith(long + "=")
                                                            for a in argv)]
    if len(given) > 1:
        _fail(f"{' and '.join(given)} cannot be combined (Hydra runs one of --run, --multirun, --cfg, --info and "
              f"--shell-completion): keep one, e.g. drop {given[-1]}")


def _with_the_checkpoints_run(argv: List[str]) -> List[str]:
    """test=true checkpoint=PATH without task=: the words that rebuild what the checkpoint's run trained (its task,
    agent values, profile, network and critic: its config.yaml beside checkpoints/, else the config the checkpoint
    holds), put before the user's own, which still win. A checkpoint that cannot be read is left to play's refusal."""
    words = {w.split("=", 1)[0].lstrip("+"): w.split("=", 1)[1] for w in argv if "=" in w and not w.startswith("-")}
    if words.get("test", "").lower() != "true" or not words.get("checkpoint") or "task" in words:
        return argv
    saved = _saved_run_config(words["checkpoint"])
    if saved is None:
        return argv
    from isaac_ppo.config.files import cfg_dir

    derived = [f"task={saved['task']['name']}"]
    agent = saved.get("agent") or {}
    if "agent" not in words and agent.get("name") and os.path.isfile(os.path.join(cfg_dir("agent"),
                                                                                   f"{agent['name']}.yaml")):
        derived.append(f"agent={agent['name']}")
    if saved.get("profile") not in (None, "none") and "profile" not in words:
        derived.append(f"profile={saved['profile']}")
    network = agent.get("network") or {}
    keys = [f"network.{key}" for key in ("hidden", "critic_hidden", "separate", "activation")]
    for block in ("rnn", "critic_rnn"):  # a recurrent network's blocks, key by key (none for a feed-forward one)
        if (network.get(block) or {}).get("name"):
            keys += [f"network.{block}.{key}" for key in network[block]]
    if (network.get("rnn") or {}).get("name"):
        keys += ["zero_rnn_on_done"]
    for key in keys:
        value = _select(agent, key)
        if value is not _ABSENT and f"agent.{key}" not in words:
            shown = "null" if value is None else (str(list(value)).replace(" ", "") if isinstance(value, list)
                                                  else str(value).lower() if isinstance(value, bool) else value)
            derived.append(f"agent.{key}={shown}")
    if "asymmetric" in saved and "asymmetric" not in words:
        derived.append(f"asymmetric={str(bool(saved['asymmetric'])).lower()}")
    print(f"[play] {words['checkpoint']}: its run's {' '.join(derived)}", flush=True)
    return derived + argv


_ABSENT = object()


def _select(tree: Any, dotted: str) -> Any:
    """tree's value at a dotted key, or _ABSENT."""
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return _ABSENT
        tree = tree[part]
    return tree


def _with_the_runs_command(argv: List[str]) -> List[str]:
    """resume=RUN_DIR (a run's folder): the run's own command line (its .hydra/overrides.yaml) with
    hydra.run.dir=RUN_DIR, so that the run continues in place from its last.pt with the config it was started with;
    the user's other words follow (a key a resume may change, such as max_iterations=)."""
    folders = [w.split("=", 1)[1] for w in argv if w.startswith("resume=") and os.path.isdir(w.split("=", 1)[1])]
    if not folders:
        return argv
    run_dir = os.path.abspath(folders[-1])
    recorded = os.path.join(run_dir, ".hydra", "overrides.yaml")
    if not os.path.isfile(os.path.join(run_dir, "checkpoints", "last.pt")):
        _fail(f"resume={folders[-1]}: no checkpoints/last.pt in that folder: give a run's folder (runs/<experiment>/"
              "<date_time>) or a checkpoint file")
    if not os.path.isfile(recorded):
        _fail(f"resume={folders[-1]}: the run's command line ({recorded}) is missing: repeat its command with "
              f"resume={os.path.join(run_dir, 'checkpoints', 'last.pt')}")
    from omegaconf import OmegaConf

    own = [str(word) for word in OmegaConf.load(recorded)
           if not str(word).lstrip("+~").startswith(("resume=", "hydra.run.dir=", "hydra."))]
    rest = [w for w in argv if not w.startswith("resume=")]
    return own + [f"hydra.run.dir={run_dir}"] + rest


def _saved_run_config(path: str) -> Optional[dict]:
    """The resolved config of the run that wrote checkpoint `path` (a plain dict), or None."""
    from omegaconf import OmegaConf

    from isaac_ppo.loop.play import run_config

    if not os.path.isfile(path) or not path.endswith(".pt"):
        return None
    saved = run_config(path)
    try:
        if saved is not None:
            return OmegaConf.to_container(OmegaConf.load(saved))
        import torch

        state = torch.load(path, map_location="cpu", weights_only=False)
        return OmegaConf.to_container(OmegaConf.create(state["config"])) if isinstance(state, dict) else None
    except Exception:  # (not ours, or damaged: play says so in one line)
        return None


def _sim_choice(argv: List[str]) -> str:
    """The sim= Hydra will use: the last one given."""
    choices = [word[4:] for word in argv if word.startswith("sim=")]
    return choices[-1] if choices else "auto"


def _prevalidate(overrides: List[str], pinned_run_dir: Optional[str] = None) -> None:
    """Refuse mistakes before Hydra makes a run directory, or writes its .hydra/ record into a pinned one (a
    hydra.run.dir holding another run's files)."""
    from isaac_ppo.config.checks import check_writable
    from isaac_ppo.config.compose import compose_config
    from isaac_ppo.errors import UserError
    from isaac_ppo.loop.resume import check_pinned_run_dir

    try:
        if pinned_run_dir is not None:  # before Hydra makes it (its own error is a traceback)
            check_writable("hydra.run.dir", pinned_run_dir)
        cfg = compose_config(overrides)
        if pinned_run_dir is not None:
            check_pinned_run_dir(cfg, pinned_run_dir)
    except UserError as error:
        _fail(str(error))


def _prevalidate_sweep(overrides: List[str], sweep_dirs: List[str]) -> None:
    """Refuse a sweep with a bad job before the first job runs (on SLURM: before anything is queued)."""
    from isaac_ppo.config.compose import sweep_jobs
    from isaac_ppo.errors import UserError

    from isaac_ppo.config.checks import check_writable

    try:
        for word in sweep_dirs:  # before Hydra makes the sweep's folder (its own error is a traceback)
            check_writable("hydra.sweep.dir", word)
        jobs = sweep_jobs(overrides)
    except UserError as error:
        _fail(str(error))
    for job in jobs:
        _prevalidate(job)


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(usage.HELP)
        return
    if "--version" in argv:
        print(usage.version())
        return
    _check_one_mode(argv)
    preload.idle_threads_sleep()  # (before torch: libgomp reads it once, when torch loads)
    from isaac_ppo.config.compose import composed_once, register_resolvers, rewrite_argv

    argv, notes = rewrite_argv(argv)  # train= (IsaacGymEnvs' name), agent=rl_games, renamed keys
    for note in notes:
        sys.stderr.write(f"isaac-ppo-train: {note}\n")
    if _sim_choice(argv) in ("auto", "isaacgym"):
        preload.isaacgym_first()  # before anything imports torch
    argv = _with_the_checkpoints_run(_with_the_runs_command(argv))  # (may read a checkpoint: torch)
    if any(a.lower() == "capture_video=true" for a in argv):
        from isaac_ppo.io.video import gl_backend  # (imports neither torch nor mujoco)

        # MuJoCo picks its OpenGL backend when imported: headless EGL on GPU nodes, OSMesa on CPUs
        devices = [a[len("device="):] for a in argv if a.startswith("device=")]
        os.environ["MUJOCO_GL"] = gl_backend(devices[-1] if devices else "cpu")
    register_resolvers()
    plain = [a for a in argv if "=" in a and not a.startswith(("-", "hydra.", "hydra/", "+hydra"))]
    flags = [a for a in argv if a.startswith("-")]
    pinned = [a.split("=", 1)[1] for a in argv if a.startswith("hydra.run.dir=")]
    single_run = not flags and all(a in plain or a.startswith("hydra.run.dir=") for a in argv)
    scratch = None
    if "multi_gpu=true" in argv and int(os.environ.get("RANK", "0")) > 0:
        scratch = _scratch_dir()
        argv += [f"hydra.run.dir={scratch}", "hydra.output_subdir=null", "hydra/job_logging=disabled",
                 "hydra/hydra_logging=disabled"]
    sys.argv = [sys.argv[0]] + argv
    try:
        with composed_once(single_run):
            if single_run:  # checked on the words Hydra's run is given (its mode's included): one composition
                _prevalidate(argv + ["hydra.mode=RUN"], pinned[-1] if pinned else None)
            elif flags in (["-m"], ["--multirun"]):  # every job of a sweep, before any is launched or queued
                _prevalidate_sweep(plain, [a.split("=", 1)[1] for a in argv
                                           if a.startswith("hydra.sweep.dir=")][-1:])
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

    from isaac_ppo.config.compose import CONFIG_MODULE

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
    claimed are removed when they hold nothing of a run (Hydra's .hydra/ and an empty or unused train.log), and
    the folders above them that it made (runs_dir, the experiment's) when that leaves them empty."""
    import shutil

    from isaac_ppo.config.compose import claimed_run_dirs, made_above_run_dirs

    for run_dir in claimed_run_dirs():
        names = set(os.listdir(run_dir)) if os.path.isdir(run_dir) else {"?"}
        if names <= {".hydra", "train.log"}:
            shutil.rmtree(run_dir, ignore_errors=True)
    for folder in made_above_run_dirs():
        try:
            os.rmdir(folder)  # (only an empty one: another run's folder inside keeps it)
        except OSError:
            pass


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

    from isaac_ppo.config.isaacgymenvs import isaacgymenvs_keys_at_start
    from isaac_ppo.errors import UserError
    from isaac_ppo.io.logger import write_config
    from isaac_ppo.loop.build import build_env_and_scheduler, build_runner
    from isaac_ppo.loop.resume import resume_point

    if run_dir is None:
        run_dir = HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else os.getcwd()
    run_dir = comm.broadcast_object(run_dir)  # rank 0's: every rank reads from it (resume), rank 0 writes
    # (what to resume is decided before the env is built: a refusal costs nothing)
    resume_from = None if cfg.test or cfg.agent.backend == "rl_games" else resume_point(cfg, run_dir)
    cfg = isaacgymenvs_keys_at_start(cfg, comm, resume_from)
    env, scheduler = build_env_and_scheduler(cfg, rank=comm.rank, local_ranks=comm.local_world_size, device=device)

    if cfg.test:
        from isaac_ppo.loop.evaluate import describe
        from isaac_ppo.loop.play import play

        video = os.path.join(run_dir, "play.mp4") if cfg.capture_video else None
        result = play(cfg, env, cfg.checkpoint, video)
        if cfg.wandb_activate:
            from isaac_ppo.io import wandb_sink

            wandb_sink.log_play(cfg, run_dir, result)
        played = describe(result, result["measure_names"])  # (the task's measures too: ShadowHand's successes)
        print(f"[{cfg.task.name}] {result['episodes']} episodes (one per env, from reset): {played}, "
              f"mean length {result['length_mean']:.1f}")
        if video:
            print(f"[{cfg.task.name}] video of env 0 ({result['frames']} frames): {video}")
        if cfg.save_probe_set:
            print(f"[{cfg.task.name}] probe set: {result['probe_states']} of the {result['states_played']:,} "
                  f"observations played, in {cfg.save_probe_set} (use it with "
                  f"diagnostics.probe_set={cfg.save_probe_set})")
        return result

    if cfg.agent.backend == "rl_games":  # the same task, env and values, rl-games' learner
        from isaac_ppo.loop.rlgames import train_with_rl_games

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


def _report_end(cfg: Any, summary: Any, run_dir: str, main: bool) -> None:
    """The last line: done, or stopped early (then the process exits with STOPPED)."""
    from isaac_ppo.loop.resume import how_to_continue

    stopped_by = summary.get("stopped_by") if summary else None
    if stopped_by:
        _stopped_by.append(stopped_by)
        if main:
            print(f"[{cfg.task.name}] stopped early by {stopped_by}: continue it with "
                  f"{how_to_continue(cfg, run_dir, summary.get('last_checkpoint'))}; exit status {STOPPED}")
    elif main:
        diverged = f"; {summary['diverged']:,} episodes ended by a diverged simulation" if summary.get("diverged") else ""
        from isaac_ppo.loop.evaluate import describe_run

        print(f"[{cfg.task.name}] done: {describe_run(summary, cfg.agent.games_to_track)}{diverged}; "
              f"results in {run_dir}")


if __name__ == "__main__":
    main()
