"""MuJoCo ports of IsaacGymEnvs tasks (shipped as isaac_ppo.tasks).

TASKS maps a task name (as in cfg/task/<name>.yaml) to the class implementing it; mujoco is imported only
when a task is built. parameter_domains(name) is what each of its parameters may hold: those every MuJoCo task
reads (here) and its family's (the family package's DOMAINS), without importing torch or the task.
"""
from __future__ import annotations

import importlib
from typing import Any, Dict

from isaac_ppo.config.domains import Domain, boolean, choice, integer, positive

TASKS = {
    "Cartpole": "isaac_ppo.tasks.classic.cartpole:Cartpole",
    "Ant": "isaac_ppo.tasks.locomotion.ant:Ant",
    "Humanoid": "isaac_ppo.tasks.locomotion.humanoid:Humanoid",
    "Anymal": "isaac_ppo.tasks.legged.anymal:Anymal",
    "AnymalTerrain": "isaac_ppo.tasks.legged.anymal_terrain:AnymalTerrain",
    "BallBalance": "isaac_ppo.tasks.classic.ball_balance:BallBalance",
    "FrankaCabinet": "isaac_ppo.tasks.manipulation.franka_cabinet:FrankaCabinet",
    "ShadowHand": "isaac_ppo.tasks.manipulation.shadow_hand:ShadowHand",
}


# the tasks with critic observations (asymmetric=true: IsaacGymEnvs' states, for the critic alone), and what they add
CRITIC_OBSERVATIONS = {
    "BallBalance": "the tray's pose and velocity, the knees' position targets and the ball's spin (ours)",
    "ShadowHand": "full_state's 211 (IsaacGymEnvs' states)",
}


def task_class(name: str) -> Any:
    module, attr = TASKS[name].split(":")
    return getattr(importlib.import_module(module), attr)


INTEGRATORS = ("euler", "rk4", "implicit", "implicitfast")  # MuJoCo's, by their names in a model file

# what tasks/base.py's MujocoTask reads, for every task
BASE_DOMAINS = {
    "env.numEnvs": integer(1), "env.episodeLength": integer(1), "env.envSpacing": positive(),
    "env.clipActions": positive(), "env.clipObservations": positive(), "env.powerScale": positive(),
    "sim.dt": positive(), "sim.substeps": integer(1),
    "mujoco.timestep": positive(), "mujoco.substeps": integer(1),
    "mujoco.integrator": choice(*INTEGRATORS, optional=True), "mujoco.contact_timeconst": positive(optional=True),
    "mujoco.refsafe": boolean(optional=True),
    "mujoco.nthread": integer(0),
    "mujoco.max_abs_qvel": positive(), "mujoco.max_abs_reward": positive(),
    "mujoco.nconmax": integer(1), "mujoco.njmax": integer(1),
}


def parameter_domains(name: str) -> Dict[str, Domain]:
    """The domain of each parameter of task `name` (a registered task): the base's, then its family's."""
    family = TASKS[name].split(":")[0].rpartition(".")[0]
    return dict(BASE_DOMAINS, **importlib.import_module(family).DOMAINS.get(name, {}))

