"""The registry of task ports: which tasks run on the MuJoCo backends, and each one's facts (its TaskSpec).

A task declares itself once, beside its code: its class carries a TaskSpec (name, model file, parameter domains,
reward terms, critic observations, what the gait check reads, solve measures, the GPU kit's sizes, what the
contract suite needs to know). Its task YAML names the class (`entry_point: package.module:Class`), so a task is
found the way Hydra finds its config: the package's cfg/task/, the folders of ISAAC_PPO_TASK_PATH, or a task node
of one's own (hydra.searchpath). make(), the config checks, the test suites, the gait check, the GPU kit and the
docs' task table read the registry, never a task's module by name.

Loading a spec imports the task's module (and so torch); listing the tasks reads YAML only.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from isaac_ppo.domains import Domain, boolean, choice, integer, positive
from isaac_ppo.errors import UserError
from isaac_ppo.task_files import load_task_file, task_config_dirs, task_config_path

ENTRY_POINT = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")  # package.module:Class
INTEGRATORS = ("euler", "rk4", "implicit", "implicitfast")  # MuJoCo's, by their names in a model file
# the kinds of gait check (isaac_ppo/lab/gait.py): the torso's speed (Ant, Humanoid), velocity-command tracking
# (legged robots), the ball (BallBalance), the drawer (FrankaCabinet), the block (ShadowHand), or the means of the
# measures a task names (extras["measures"]) for a task of one's own
GAIT_KINDS = ("torso_speed", "velocity_tracking", "ball", "drawer", "block", "measures")

# what tasks/base.py's MujocoTask reads, for every port
PORT_DOMAINS: Dict[str, Domain] = {
    "env.numEnvs": integer(1), "env.episodeLength": integer(1), "env.envSpacing": positive(),
    "env.clipActions": positive(), "env.clipObservations": positive(), "env.powerScale": positive(),
    "sim.dt": positive(), "sim.substeps": integer(1),
    "mujoco.timestep": positive(), "mujoco.substeps": integer(1),
    "mujoco.integrator": choice(*INTEGRATORS, optional=True), "mujoco.contact_timeconst": positive(optional=True),
    "mujoco.refsafe": boolean(optional=True),
    "mujoco.nthread": integer(0),
    "mujoco.max_abs_qvel": positive(), "mujoco.max_abs_reward": positive(),
    "mujoco.nconmax": integer(1), "mujoco.njmax": integer(1),
    # IsaacGymEnvs' switch of its domain randomisation (its randomization_params: tasks/randomization.py checks them)
    "task.randomize": boolean(),
}


@dataclasses.dataclass(frozen=True)
class Gait:
    """What the gait check (isaac_ppo/lab/gait.py) measures a trained policy of the task by, at its physics and at
    finer steps: one of GAIT_KINDS; for "measures", the step measures (extras["measures"] names) it averages."""

    kind: str
    measures: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ContractFacts:
    """What the contract suite (tests/integration/test_backend_contract.py) needs to know of a task beyond its
    code: overrides that make it cheap and reproducible for a test, the overrides that turn its observation noise
    off, whether its observation ends with the last actions, and an observation column that every reset starts
    at the same value (within reset_noise).
    Its known terminal state is the task's make_terminal(ids)."""

    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    noiseless: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    last_actions_in_obs: bool = False
    reset_column: Optional[int] = None  # (None: the suite checks none)
    reset_noise: float = 0.0


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A task, declared once (the class attribute `spec` of its MujocoTask subclass)."""

    name: str  # as in its task YAML (task=NAME) and IsaacGymEnvs
    model: str  # its MJCF, relative to the folder of the module that defines the task ("assets/ant.xml")
    domains: Mapping[str, Domain] = dataclasses.field(default_factory=dict)  # its own parameters, beside PORT_DOMAINS
    reward_terms: Tuple[str, ...] = ()  # extras["reward_terms"], in the order its reward adds them up
    critic_observations: str = ""  # what its critic observations hold (asymmetric=true); "" when it has none
    gait: Optional[Gait] = None  # None: no gait check (a task that neither moves nor manipulates, e.g. Cartpole)
    solve_measures: Mapping[str, Domain] = dataclasses.field(default_factory=dict)  # evaluation measure -> thresholds
    gpu_kit_envs: Tuple[int, ...] = (4096, 16384)  # the GPU kit's throughput sizes
    gpu_kit_memory_envs: Tuple[int, ...] = (1024, 4096, 16384)  # and its memory sizes
    contract: ContractFacts = ContractFacts()
    # IsaacGymEnvs' actor names (its randomization_params' actor_params keys) -> the root body of each in the
    # port's model: what domain randomisation randomises (tasks/randomization.py); empty: none
    actors: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.gait is not None and self.gait.kind not in GAIT_KINDS:
            raise ValueError(f"task {self.name}: gait kind {self.gait.kind!r} is not one of {', '.join(GAIT_KINDS)}")

    def parameter_domains(self) -> Dict[str, Domain]:
        """The domain of each of its parameters: every port's, its own, and its solve measures' thresholds."""
        measures = {f"solve_measures.{name}": domain for name, domain in self.solve_measures.items()}
        return dict(PORT_DOMAINS, **self.domains, **measures)


def available_tasks() -> List[str]:
    """Every task YAML's name (ported or Isaac Gym only), over task_config_dirs()."""
    names = set()
    for folder in task_config_dirs():
        if os.path.isdir(folder):
            names.update(f[: -len(".yaml")] for f in os.listdir(folder) if f.endswith(".yaml"))
    return sorted(names)


@functools.lru_cache(maxsize=None)
def _entry_point_in(path: str, mtime: float) -> Optional[str]:
    return load_task_file(path).get("entry_point")


def entry_point(name: str) -> Optional[str]:
    """The class a task YAML names (`entry_point: module:Class`); None for a task without a MuJoCo port."""
    path = task_config_path(name)
    return None if path is None else _entry_point_in(path, os.path.getmtime(path))


def registered_tasks() -> List[str]:
    """The tasks with a MuJoCo port (a task YAML that names its class), in name order: what the suites, the GPU
    kit and the docs' task table run over."""
    return [name for name in available_tasks() if entry_point(name)]


def task_class(name: str, entry: Optional[str] = None) -> Any:
    """The class of task `name`, from entry (a task node's entry_point) or its task YAML's; its spec checked."""
    entry = entry or entry_point(name)
    if not entry:
        raise UserError(f"task {name!r} has no MuJoCo port (ported tasks: {', '.join(registered_tasks())}); a task "
                        f"of one's own names its class in its task YAML: entry_point: package.module:Class")
    if not ENTRY_POINT.match(str(entry)):
        raise UserError(f"task.entry_point={entry!r} must name a class as package.module:Class")
    module_name, _, attr = entry.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UserError(f"task.entry_point={entry}: cannot import {module_name} ({error}); is its package installed "
                        "or on PYTHONPATH?") from None
    cls = getattr(module, attr, None)
    spec = getattr(cls, "spec", None)
    if not isinstance(spec, TaskSpec):
        raise UserError(f"task.entry_point={entry}: name a task class (module:Class) whose `spec` is a TaskSpec "
                        "(isaac_ppo/envs/registry.py)")
    if spec.name != name:
        raise UserError(f"task.entry_point={entry} declares task {spec.name!r}, not {name!r}: make the task YAML's "
                        "name and the spec's name the same")
    return cls


def spec(name: str, entry: Optional[str] = None) -> TaskSpec:
    """The TaskSpec of task `name` (see task_class)."""
    return task_class(name, entry).spec


def specs() -> Dict[str, TaskSpec]:
    """Every registered task's spec, by name."""
    return {name: spec(name) for name in registered_tasks()}


def spec_of_node(task: Mapping[str, Any]) -> Optional[TaskSpec]:
    """The spec of a run's task node (its name and entry_point, as Hydra composed it; a node without one, e.g. the
    config.yaml of a run made before task YAMLs named their class, takes its task YAML's); None without a port."""
    name = str(task.get("name"))
    entry = task.get("entry_point") or entry_point(name)
    return spec(name, str(entry)) if entry else None
