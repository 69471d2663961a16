"""Every rule a config must meet before a run starts, each broken one a one-line UserError.

The schemas (config/schema.py) give types and required keys; the rules here are the values: each run-level key's
declared domain (RUN_DOMAINS; a task declares its parameters' in its TaskSpec), the run folder's name and place, what
the diagnostics can measure, what rl-games can run, and every plan the scheduler can ask for against the env
pool. They run once per launch, on the typed config, before a run directory exists.
"""
from __future__ import annotations

import functools
from typing import Any, Dict, List, Optional

from omegaconf import DictConfig, OmegaConf

from isaac_ppo import domains
from isaac_ppo.domains import Domain, choice, integer, positive, real
from isaac_ppo.config.schema import AgentConfig, agent_domains
from isaac_ppo.errors import UserError

# The run-level keys' domains, declared once (a task's parameters declare theirs in its TaskSpec): a value outside is
# one line naming the key, the value and the domain (isaac_ppo/domains.py). What each number means bounds it.
RUN_DOMAINS: Dict[str, Domain] = {
    "sim": choice("auto", "mujoco", "mjwarp", "isaacgym"),
    "dist_backend": choice("auto", "nccl", "gloo"),
    "pipeline": choice("gpu", "cpu", optional=True),  # Isaac Gym's tensor pipeline
    "seed": integer(-1),  # -1: a random seed (IsaacGymEnvs')
    "num_envs": integer(1, optional=True),  # null: the task's numEnvs
    "max_iterations": integer(1, optional=True),
    "max_env_steps": integer(1, optional=True),
    "max_diverged_fraction": real(0.0, 1.0),
    "torch_threads": integer(1),
    "collect_torch_threads": integer(1),
    "save_interval_iterations": integer(1),
    "play_episodes": integer(1),
    "capture_video_len": integer(1),
    "capture_video_interval_iterations": integer(0),
    "graphics_device_id": integer(-1, optional=True),
    "eval.interval_env_steps": integer(0),  # 0: no evaluation during training
    "eval.num_envs": integer(1),
    "diagnostics.interval_iterations": integer(1),
    "diagnostics.samples": integer(1),
    "diagnostics.delta": real(0.0, 1.0, low_open=True, high_open=True),
    "diagnostics.tau": real(0.0, 1.0, high_open=True),
    "diagnostics.grid": integer(1),
    "diagnostics.coverage_method": choice("pca", "umap"),
    **agent_domains(),  # (declared with each agent key: config/schema.py)
}
FIXED_SCHEDULER = "isaac_ppo.scheduler.fixed.FixedScheduler"


def check(cfg: DictConfig) -> None:
    """Raise UserError naming the first key whose value breaks a rule."""
    tree = OmegaConf.to_container(cfg, resolve=True)
    values = domains.flat(tree)
    domains.check_finite(values)
    domains.check(values, RUN_DOMAINS)
    check_folder_name("experiment", cfg.experiment)
    check_profile(cfg.profile, cfg.task.name)
    hidden = list(cfg.agent.network.hidden)
    if not hidden or min(hidden) < 1:
        raise UserError(f"agent.network.hidden={hidden} must list at least one layer, each of at least 1 unit")
    critic_hidden = cfg.agent.network.get("critic_hidden")
    if critic_hidden is not None:
        critic_hidden = list(critic_hidden)
        if not critic_hidden or min(critic_hidden) < 1:
            raise UserError(f"agent.network.critic_hidden={critic_hidden} must list at least one layer, each of at "
                            "least 1 unit (or be null: the actor's widths)")
        # (play, test=true, rebuilds the checkpoint's critic whatever the flags say)
        if not (cfg.agent.network.separate or critic_observations_on(cfg) or cfg.test):
            raise UserError(f"agent.network.critic_hidden={critic_hidden} sizes a critic of its own, and this one "
                            "shares the actor's trunk: add agent.network.separate=true (or asymmetric=true), or "
                            "drop critic_hidden")
        hidden = hidden + critic_hidden  # (the widest layer of either network, for the diagnostics' checks)
    hidden = hidden + check_recurrence(cfg)
    check_stale_learning(cfg.agent)
    if not cfg.test:
        check_writable("runs_dir", cfg.runs_dir)
    if cfg.test and not cfg.checkpoint:
        raise UserError("test=true needs checkpoint=PATH (a .pt file from a run's checkpoints/)")
    if cfg.capture_video:  # (play films its episodes; training, every capture_video_interval_iterations iterations)
        from isaac_ppo.io.video import gl_backend, offscreen_gl_problem

        problem = offscreen_gl_problem(gl_backend(cfg.device))
        if problem:
            raise UserError(problem)
    if cfg.save_probe_set and not cfg.test:
        raise UserError(f"save_probe_set={cfg.save_probe_set} is play's: add test=true checkpoint=PATH (the policy "
                        "whose states to sample)")
    if cfg.diagnostics.probe_set and cfg.diagnostics.enabled and not cfg.test:
        from isaac_ppo.diagnostics import probe_set

        states = probe_set.load(cfg.diagnostics.probe_set, cfg.task.name)["obs"].shape[0]
        if states < max(hidden):
            raise UserError(f"diagnostics.probe_set={cfg.diagnostics.probe_set} holds {states} observations, fewer "
                            f"than the widest hidden layer ({max(hidden)} units): feature rank needs as many")
    if cfg.test and cfg.multi_gpu:
        raise UserError("test=true plays in one process: drop multi_gpu=true (and torchrun)")
    if cfg.agent.backend == "rl_games":
        check_rl_games(cfg)
    if cfg.wandb_activate:
        from isaac_ppo.io.wandb_sink import require_wandb

        require_wandb()
    check_diagnostics(cfg.diagnostics, hidden)
    # the task's rules last but the plans': its spec imports the task's module, and torch (~1.2 s), which a mistake
    # in any other key should not wait for
    check_task_parameters(tree["task"], runs_the_port(cfg.sim))
    check_critic_observations(cfg.asymmetric, tree["task"])
    if not cfg.test:  # (play collects no batch: no plan to check)
        check_scheduler(cfg)


OWN_TASK_KEYS = ("name", "entry_point", "solve_thresholds")  # a task node's keys that are no parameter of the task
# IsaacGymEnvs' randomization_params: a tree of its own schema (tasks/randomization.py reads and checks it)
RANDOMIZATION_KEYS = "task.randomization_params."


def check_task_parameters(task: Dict[str, Any], port: bool = True) -> None:
    """The task's parameters (its resolved node) inside their declared domains (its TaskSpec's domains beside
    envs/registry.py's PORT_DOMAINS, from the registry), and its solve thresholds a list of numbers. port: the run
    runs the MuJoCo port, which refuses a key it does not read (task.env.episodeLenght=100 would train at the
    task's own 500); Isaac Gym's task may read keys of IsaacGymEnvs the port has not (task.sim.physx.*)."""
    thresholds = task.get("solve_thresholds", [])
    if not isinstance(thresholds, list) or not all(isinstance(t, (int, float)) for t in thresholds):
        raise UserError(f"task.solve_thresholds={thresholds!r} must be a list of evaluation returns")
    if not isinstance(task.get("name"), str):  # (a task config of one's own can put anything there)
        raise UserError(f"task.name={task.get('name')!r} must be the task's name (task=NAME picks one)")
    declared = None if as_shipped(task) else task_domains(task)
    if declared is not None:
        check_solve_measures(task["name"], task.get("solve_measures") or {}, declared)
        values = {key: value for key, value in domains.flat(task).items()
                  if not key.startswith(RANDOMIZATION_KEYS)}  # (its own schema: check_randomization)
        if port:
            unread = sorted(key for key in values if key not in declared and key not in OWN_TASK_KEYS
                            and not key.startswith("solve_measures."))
            if unread:
                known = [f"task.{key}" for key in declared]
                raise UserError(f"task.{unread[0]}={values[unread[0]]!r}: task {task['name']} has no such parameter"
                                f"{domains.did_you_mean('task.' + unread[0], known)}; its MuJoCo port reads only "
                                "what its spec declares")
        domains.check(values, declared, prefix="task.")
        if port:
            check_randomization(task)


def check_randomization(task: Dict[str, Any]) -> None:
    """IsaacGymEnvs' domain randomisation on the port: its randomization_params read by their schema (one line for
    the first wrong key), its actors the task's (its spec's actors); randomize=true needs the block."""
    node = task.get("task") or {}
    if "randomization_params" not in node and not node.get("randomize"):
        return
    from isaac_ppo.envs import registry
    from isaac_ppo.tasks.randomization import PREFIX, read_plan

    if "randomization_params" not in node:
        raise UserError(f"task.task.randomize=true: task {task['name']} has no {PREFIX} block (IsaacGymEnvs' has "
                        "none either): give one, or leave randomize false")
    spec = registry.spec_of_node(task)
    read_plan(node["randomization_params"], tuple(spec.actors) if spec is not None else ())


def runs_the_port(sim: str) -> bool:
    """Whether a run of sim= runs the task's MuJoCo port (sim=auto takes Isaac Gym where it is installed)."""
    import importlib.util

    return sim in ("mujoco", "mjwarp") or (sim == "auto" and importlib.util.find_spec("isaacgym") is None)


def check_solve_measures(name: str, solve_measures: Any, declared: Dict[str, Domain]) -> None:
    """task.solve_measures: evaluation measure -> its thresholds, each measure one the task declares thresholds for
    (its spec's solve_measures: the measures it reports, eval.NAME, that mean success)."""
    if not isinstance(solve_measures, dict):
        raise UserError(f"task.solve_measures={solve_measures!r} must map evaluation measures to lists of thresholds")
    allowed = sorted(key.split(".", 1)[1] for key in declared if key.startswith("solve_measures."))
    for measure in solve_measures:
        if measure not in allowed:
            offer = f"its measures with thresholds: {', '.join(allowed)}" if allowed else "it declares none"
            raise UserError(f"task.solve_measures.{measure}: task {name} has no evaluation measure {measure!r} to "
                            f"solve by ({offer})")


def as_shipped(task: Dict[str, Any]) -> bool:
    """Whether a run's task node is its packaged task YAML, unchanged: valid by construction (every shipped YAML's
    keys and values are checked against its spec by tests/integration/test_domains.py), so the spec, whose module
    imports torch (~1.2 s), need not be loaded to check it: a process that only checks configs (a study's, a
    sweep's, a refused command) stays torch-free unless a task key was changed."""
    import os

    from isaac_ppo.config.files import cfg_dir

    path = os.path.join(cfg_dir("task"), f"{task.get('name')}.yaml")
    return os.path.isfile(path) and _canonical(task) == _shipped(path, os.path.getmtime(path))


def _canonical(tree: Any) -> str:
    """A tree as text that tells 0 from 0.0 and 1 from true (== does not), key order aside."""
    import json

    return json.dumps(tree, sort_keys=True, default=repr)


@functools.lru_cache(maxsize=None)
def _shipped(path: str, mtime: float) -> str:
    from isaac_ppo.task_files import load_task_file  # (a task file may start from another's: its defaults)

    return _canonical(OmegaConf.to_container(load_task_file(path), resolve=True))


def task_domains(task: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The parameter domains of a run's task node (its spec, from the registry); None for a task without a MuJoCo
    port (Isaac Gym only)."""
    from isaac_ppo.envs import registry

    spec = registry.spec_of_node(task)
    return None if spec is None else spec.parameter_domains()


def check_critic_observations(asymmetric: bool, task: Dict[str, Any]) -> None:
    """asymmetric=true needs a task with critic observations (its spec's critic_observations); a task without a
    MuJoCo port is IsaacGymEnvs' own, whose config decides (its env.asymmetric_observations)."""
    if not asymmetric:
        return
    from isaac_ppo.envs import registry  # (imports torch: only when asked)

    spec = registry.spec_of_node(task)
    if spec is not None and not spec.critic_observations:
        having = [name for name, other in registry.specs().items() if other.critic_observations]
        raise UserError(f"asymmetric=true: task={spec.name} has no critic observations (tasks with them: "
                        f"{', '.join(having) or 'none yet'}): drop asymmetric=true")


def critic_observations_on(cfg: DictConfig) -> bool:
    """Whether the run's critic gets the task's critic observations: asymmetric=true, or the task config's own
    env.asymmetric_observations (IsaacGymEnvs' key), whose value is checked here: the checks that read it come
    before the task's own (check), and a wrong value must be named as itself, not as what it switched off."""
    own = (cfg.task.get("env") or {}).get("asymmetric_observations", False)
    domains.check({"task.env.asymmetric_observations": own}, {"task.env.asymmetric_observations": domains.boolean()})
    return bool(cfg.asymmetric or own)


def check_profile(profile: str, task: str) -> None:
    """profile=NAME composes cfg/profile/task/NAME_<task>.yaml when it exists (an optional default): a profile
    without values for this task is refused, never applied as nothing."""
    import os

    from isaac_ppo.config.files import cfg_dir

    if profile == "none":
        return
    folder = os.path.join(cfg_dir("profile"), "task")
    if not os.path.isfile(os.path.join(folder, f"{profile}_{task}.yaml")):
        tasks = sorted(name[len(profile) + 1: -len(".yaml")] for name in os.listdir(folder)
                       if name.startswith(profile + "_") and name.endswith(".yaml"))
        raise UserError(f"profile={profile} has no settings for task={task} (it has: {', '.join(tasks) or 'none'}): "
                        f"drop profile={profile}, or set the values yourself")


def check_rl_games(cfg: DictConfig) -> None:
    """What rl-games cannot do here (isaac_ppo/loop/rlgames.py)."""
    target = OmegaConf.select(cfg, "scheduler._target_", default=FIXED_SCHEDULER)
    mode = OmegaConf.select(cfg, "scheduler.mode", default="sync")
    if target != FIXED_SCHEDULER:
        raise UserError(
            f"agent.backend=rl_games collects num_envs x agent.horizon every epoch: scheduler._target_={target} "
            "is ours only (use scheduler=fixed)"
        )
    if mode != "sync":
        raise UserError(
            f"agent.backend=rl_games collects synchronously: scheduler.mode={mode} is ours only (use scheduler=fixed)"
        )
    if cfg.multi_gpu:
        raise UserError("agent.backend=rl_games with multi_gpu=true is not wired here: drop one of them")
    if cfg.test:
        raise UserError("test=true plays our checkpoints: drop agent.backend=rl_games (rl-games' own are in <run>/nn/)")
    for key in ("resume", "checkpoint"):
        if cfg[key]:
            raise UserError(f"agent.backend=rl_games does not resume or load weights here: drop {key}={cfg[key]}")
    if cfg.capture_video:
        raise UserError("capture_video=true while training films our learner's policy: drop it with "
                        "agent.backend=rl_games (play its .pth with test=true capture_video=true)")
    if cfg.agent.network.get("critic_hidden") is not None and not critic_observations_on(cfg):
        raise UserError("agent.backend=rl_games sizes a separate critic as its actor (its actor_critic network); "
                        "agent.network.critic_hidden sizes its central value only (asymmetric=true): drop critic_hidden")


def check_diagnostics(diagnostics: DictConfig, hidden: list) -> None:
    """Diagnostics settings that cannot measure."""
    if diagnostics.coverage_method == "umap" and diagnostics.coverage and diagnostics.enabled:
        try:
            import umap  # noqa: F401
        except ImportError:
            raise UserError("diagnostics.coverage_method=umap needs umap-learn: pip install 'isaac-ppo[umap]'") from None
    if diagnostics.enabled and diagnostics.samples < max(hidden):
        raise UserError(
            f"diagnostics.samples={diagnostics.samples} is below the widest hidden layer ({max(hidden)} units): "
            f"feature rank needs at least as many samples as units"
        )


def check_scheduler(cfg: DictConfig) -> None:
    """Every plan the scheduler can ask for, against the env pool, within the budgets."""
    from isaac_ppo.config import budgets
    from isaac_ppo.scheduler.plan import build_scheduler, check_plans, pool_size

    scheduler = build_scheduler(cfg)
    max_iterations, max_env_steps = budgets(cfg)
    first = scheduler.plan(0, [])
    check_minibatch(cfg, first)
    check_chunks(cfg, first)
    check_plans(scheduler, pool_size(cfg, scheduler, max_iterations, max_env_steps), max_iterations, max_env_steps)
    if max_env_steps is not None and first.batch_size > max_env_steps:
        raise UserError(f"max_env_steps={max_env_steps} is smaller than the first batch ({first.batch_size} env steps)")


def check_recurrence(cfg: DictConfig) -> List[int]:
    """agent.network.rnn and critic_rnn: a named layer has units; critic_rnn needs a critic of its own and an actor
    that is recurrent. Returns the recurrent widths (the diagnostics read their outputs too)."""
    net = cfg.agent.network
    widths = []
    for name in ("rnn", "critic_rnn"):
        node = net[name]
        if node.name is not None and node.units is None:
            raise UserError(f"agent.network.{name}.name={node.name} needs agent.network.{name}.units=N (its width, "
                            "hidden units per layer, as rl-games' rnn block)")
        if node.name is not None:
            widths.append(int(node.units))
    if net.critic_rnn.name is not None:
        if net.rnn.name is None:
            raise UserError(f"agent.network.critic_rnn.name={net.critic_rnn.name} makes the critic recurrent, and "
                            "the actor is feed-forward: set agent.network.rnn as well (critic_rnn is the critic's own "
                            "shape of it), or drop critic_rnn")
        if not (net.separate or critic_observations_on(cfg) or cfg.test):
            raise UserError(f"agent.network.critic_rnn.name={net.critic_rnn.name} shapes a critic of its own, and "
                            "this one shares the actor's trunk: add agent.network.separate=true (or asymmetric=true), "
                            "or drop critic_rnn")
    return widths


def check_stale_learning(agent: DictConfig) -> None:
    """The two ways of learning from a stale batch (agent/stale.py) do not combine, and V-trace reads a feed-forward
    batch."""
    if agent.stale_correction == "vtrace" and agent.stale_update == "delayed":
        raise UserError("agent.stale_correction=vtrace and agent.stale_update=delayed both answer the one-update lag "
                        "(the delayed update learns at the behaviour parameters, where the batch is on-policy): "
                        "choose one")
    if agent.stale_clip == "behaviour" and agent.stale_weight != AgentConfig.stale_weight:  # (set, not defaulted)
        raise UserError(f"agent.stale_weight={agent.stale_weight} weights the proximal clip's surrogate, and "
                        "agent.stale_clip=behaviour has none: set agent.stale_clip=proximal or drop "
                        "agent.stale_weight")
    if agent.stale_correction == "vtrace" and agent.network.rnn.name is not None:
        raise UserError("agent.stale_correction=vtrace is for feed-forward networks; this one has "
                        f"agent.network.rnn.name={agent.network.rnn.name}: drop one (agent.stale_update=delayed works "
                        "with both)")


def check_chunks(cfg: DictConfig, plan: Any) -> None:
    """A recurrent run's first plan cut into chunks of agent.seq_length steps: no longer than the rollout, and
    enough chunks for every minibatch of an epoch (a minibatch is whole chunks)."""
    if cfg.agent.network.rnn.name is None:
        return
    length = int(cfg.agent.seq_length)
    if length > plan.rollout_length:
        raise UserError(f"agent.seq_length={length} is longer than the rollout (agent.horizon={plan.rollout_length} "
                        f"steps): a chunk for truncated BPTT lies inside one rollout; give agent.seq_length<="
                        f"{plan.rollout_length}")
    from isaac_ppo.agent.recurrent import chunk_count

    chunks = chunk_count(plan.rollout_length, length) * plan.num_envs
    minibatches = -(-plan.batch_size // plan.minibatch_size)
    if chunks < minibatches:
        raise UserError(f"{chunks} chunks of agent.seq_length={length} steps ({plan.num_envs} envs) cannot fill "
                        f"{minibatches} minibatches an epoch: a minibatch is whole chunks; give fewer "
                        "(agent.num_mini_batches) or a shorter agent.seq_length")


def check_minibatch(cfg: DictConfig, plan: Any) -> None:
    """The common case in a user's words: the fixed scheduler's batch (num_envs x agent.horizon), made smaller than
    the task's own (num_envs=64), no longer divided by the minibatch the task's agent YAML sizes for its own batch.
    The one line names the batch, the minibatch and the override that keeps the task's minibatches an epoch."""
    target = OmegaConf.select(cfg, "scheduler._target_", default=FIXED_SCHEDULER)
    if target != FIXED_SCHEDULER or cfg.agent.num_mini_batches is not None:
        return
    batch, minibatch = plan.batch_size, cfg.agent.minibatch_size
    if batch % minibatch == 0:
        return
    own_batch = int(cfg.task.env.numEnvs) * int(cfg.agent.horizon)
    per_epoch = own_batch // minibatch if own_batch % minibatch == 0 else 0
    if per_epoch and batch % per_epoch == 0:
        fix = (f"agent.num_mini_batches={per_epoch} ({cfg.task.name}'s {per_epoch} minibatch"
               f"{'es' if per_epoch > 1 else ''} an epoch, of {batch // per_epoch:,} transitions here)")
    else:
        from isaac_ppo.scheduler.plan import nearest_divisors

        fits = max(d for d in range(1, min(batch, minibatch) + 1) if batch % d == 0)
        fix = (f"agent.minibatch_size={fits} (sizes that divide it, the nearest: {nearest_divisors(batch, minibatch)}),"
               " or agent.num_mini_batches=N (N minibatches an epoch, whatever the batch)")
    relation = "smaller than" if batch < minibatch else "not a multiple of"
    raise UserError(f"num_envs={plan.num_envs} x agent.horizon={plan.rollout_length} is a batch of {batch:,} "
                    f"transitions, {relation} {cfg.task.name}'s minibatch (agent.minibatch_size={minibatch}, sized "
                    f"for its {int(cfg.task.env.numEnvs):,} envs): add {fix}")


def check_folder_name(key: str, name: str) -> None:
    """A name that becomes one folder under runs_dir (experiment=): not a path that would climb out of runs_dir
    or nest in it ('..', '/'), and nothing a shell or a file system mangles (control characters). '' is the
    default (the task's name)."""
    if name in (".", "..") or "/" in name or "\\" in name or any(ord(c) < 32 for c in name):
        raise UserError(f"{key}={name!r} is outside its domain: one folder name (no '/', '\\', '.' or '..', no "
                        "control characters); runs_dir= says where the folders go")


MIN_FREE_BYTES = 64 << 10  # less is a full disk: Hydra's record and config.yaml alone take ~15 kB


def check_writable(key: str, folder: str) -> None:
    """A folder the run will create files under: it, or the nearest folder above it that exists, must be
    writable and its disk not full (before Hydra makes a run directory there, not a traceback from inside
    Hydra). A disk that fills during the run is a RunFailure (isaac_ppo/io)."""
    import os
    import shutil

    existing = os.path.abspath(folder)
    while not os.path.isdir(existing):
        parent = os.path.dirname(existing)
        if os.path.exists(existing) or parent == existing:  # a file in the way, or nothing exists
            raise UserError(f"{key}={folder} cannot be made: {existing} is not a folder")
        existing = parent
    if not (os.access(existing, os.W_OK) and os.access(existing, os.X_OK)) or not _can_make_folder_in(existing):
        raise UserError(f"{key}={folder} cannot be written ({existing} is not writable for this user): point "
                        f"{key}= at a folder you can write")
    free = shutil.disk_usage(existing).free
    if free < MIN_FREE_BYTES:
        raise UserError(f"{key}={folder}: no space left on its device ({free:,} bytes free under {existing}): free "
                        f"space or point {key}= elsewhere")


def _can_make_folder_in(existing: str) -> bool:
    """Whether a folder can really be made there. For other users access() answers that; to root it says yes on a
    virtual file system too (/proc), where mkdir then fails: for root a probe folder is made and removed at once."""
    import os
    import tempfile

    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return True
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".isaac-ppo-probe-", dir=existing))
    except OSError:
        return False
    return True
