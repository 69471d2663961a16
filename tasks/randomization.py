"""Domain randomisation as IsaacGymEnvs declares it: `task.randomize` and `task.randomization_params` in a task's
config (IsaacGymEnvs 1.5.1: docs/domain_randomization.md, VecTask.apply_randomizations, utils/dr_utils.py), on both
MuJoCo backends.

What is drawn, and when (IsaacGymEnvs' rules; "frames" are its physics frames, control steps x the task's
env.controlFrequencyInv, counted over the pool as its sim's frame count is):
- the noise on observations and actions: white noise drawn every step, correlated noise drawn once per (env, column)
  after each re-draw, their ranges following the schedule; the ranges are re-drawn, with sim_params (gravity: one
  value for the whole pool, as PhysX has one scene), when `frequency` frames have passed since the last time;
- actor_params: per env and per element (each DOF, body, geom or tendon of the actor its own sample), drawn for
  every env at the first reset and again for an env that resets after `frequency` control steps since its last
  draw. setup_only parameters are drawn once, at the first reset.

How IsaacGymEnvs' properties map onto MuJoCo's model fields, per env (mujoco.batch's Batch.expand, MuJoCo Warp's
batched model fields), the actor being the subtree of the body its task's spec names (TaskSpec.actors):
- dof_properties (hinge and slide joints; a free joint is no DOF): stiffness and damping are a position actuator's kp
  and kv where one drives the joint (PhysX's drive), else the joint's spring stiffness and damping; lower and upper
  the joint's range; armature and friction the DOF's armature and frictionloss;
- rigid_body_properties: mass, the inertia scaled with it (IsaacGymEnvs recomputes the inertia);
- rigid_shape_properties: friction (sliding), torsion_friction and rolling_friction the geom's friction columns;
- tendon_properties: damping and stiffness of the tendons whose joints are the actor's;
- scale (one draw per env for the whole actor, IsaacGymEnvs' set_actor_scale): the actor's geometry and the positions
  inside it times s, its masses times s^3 and inertias times s^5 (PhysX's rule for scaling a rigid actor at constant
  density), on top of any mass draw.
What has no counterpart here (color, restitution, a DOF's velocity or effort, the other PhysX keys) is said once, in
one line, when the env is built, and not applied.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from isaac_ppo.errors import UserError

DISTRIBUTIONS = ("gaussian", "uniform", "loguniform")
NOISE_DISTRIBUTIONS = ("gaussian", "uniform")  # (IsaacGymEnvs builds no noise for a loguniform one)
OPERATIONS = ("additive", "scaling")
SCHEDULES = ("linear", "constant")
DRAW_KEYS = ("range", "operation", "distribution", "schedule", "schedule_steps", "setup_only", "num_buckets")
NOISE_KEYS = ("range", "range_correlated", "operation", "distribution", "schedule", "schedule_steps")
# IsaacGymEnvs' property -> attribute -> what it becomes here (None: said once, not applied)
SUPPORTED = {
    "dof_properties": {"stiffness": "stiffness", "damping": "damping", "lower": "jnt_range_low",
                       "upper": "jnt_range_high", "armature": "dof_armature", "friction": "dof_frictionloss",
                       "velocity": None, "effort": None},
    "rigid_body_properties": {"mass": "body_mass"},
    "rigid_shape_properties": {"friction": "geom_friction_0", "torsion_friction": "geom_friction_1",
                               "rolling_friction": "geom_friction_2", "restitution": None, "compliance": None,
                               "thickness": None, "filter": None, "contact_offset": None, "rest_offset": None},
    "tendon_properties": {"damping": "tendon_damping", "stiffness": "tendon_stiffness"},
}
POSITIVE = ("mass", "friction", "torsion_friction", "rolling_friction")  # must stay > 0 (friction 0: NaN on Warp)
# (and an actor's scale: its one original value is 1)
PREFIX = "task.task.randomization_params"


@dataclasses.dataclass(frozen=True)
class Draw:
    """One randomised quantity: IsaacGymEnvs' generate_random_samples and its schedule."""

    key: str  # its dotted key, for messages
    low: float
    high: float
    operation: str
    distribution: str
    schedule: Optional[str] = None
    schedule_steps: int = 1
    setup_only: bool = False
    num_buckets: int = 0
    correlated: Tuple[float, float] = (0.0, 0.0)  # (noise only: range_correlated)

    def scale(self, frames: int) -> float:
        if self.schedule == "linear":
            return min(frames, self.schedule_steps) / self.schedule_steps
        if self.schedule == "constant":
            return 0.0 if frames < self.schedule_steps else 1.0
        return 1.0

    def bounds(self, frames: int, pair: Optional[Tuple[float, float]] = None) -> Tuple[float, float]:
        """The range (or gaussian mean and standard deviation: IsaacGymEnvs' "variance" is used as one) under the
        schedule: additive ranges shrink toward 0, scaling ranges toward 1 (a gaussian's deviation toward 0)."""
        a, b = pair if pair is not None else (self.low, self.high)
        s = self.scale(frames)
        if self.operation == "additive":
            return a * s, b * s
        if self.distribution == "gaussian":
            return a * s + (1.0 - s), b * s
        return a * s + (1.0 - s), b * s + (1.0 - s)

    def sample(self, shape: Tuple[int, ...], frames: int, generator: torch.Generator, device: Any) -> torch.Tensor:
        a, b = self.bounds(frames)
        if self.distribution == "gaussian":
            return a + b * torch.randn(shape, generator=generator, device=device)
        u = torch.rand(shape, generator=generator, device=device)
        if self.distribution == "loguniform":
            if a == b:  # (a schedule at 0 with an additive range: IsaacGymEnvs' log(0))
                return torch.full(shape, a, device=device)
            return torch.exp(math.log(a) + (math.log(b) - math.log(a)) * u)
        return a + (b - a) * u

    def apply(self, original: torch.Tensor, sample: torch.Tensor) -> torch.Tensor:
        """IsaacGymEnvs' apply_random_samples: original x or + sample, then its buckets (friction's num_buckets)."""
        value = original * sample if self.operation == "scaling" else original + sample
        if self.num_buckets > 0:
            value = buckets_of(value, self)
        return value


def buckets_of(value: torch.Tensor, draw: Draw) -> torch.Tensor:
    """IsaacGymEnvs' get_bucketed_val: num_buckets values evenly from the range's low (a gaussian's mean - 2 sqrt
    of its second number) upward, each value replaced by the bucket at or below it (below the lowest: the highest
    bucket, as its bisect(...) - 1 gives -1)."""
    if draw.distribution == "uniform":
        low, high = draw.low, draw.high
    else:
        low, high = draw.low - 2.0 * math.sqrt(draw.high), draw.low + 2.0 * math.sqrt(draw.high)
    edges = torch.tensor([(high - low) * i / draw.num_buckets + low for i in range(draw.num_buckets)],
                         dtype=value.dtype, device=value.device)
    return edges[torch.searchsorted(edges, value.contiguous(), right=True) - 1]  # (bisect.bisect's count)


# --------------------------------------------------------------------------------------------------
# the schema: read and checked once, before anything is built


@dataclasses.dataclass
class Plan:
    frequency: int
    noise: Dict[str, Draw]  # "observations" / "actions"
    gravity: Optional[Draw]
    actors: Dict[str, Dict[Tuple[str, str], Draw]]  # actor -> (property, attribute) -> draw
    unsupported: List[str]  # dotted keys said once and not applied


def read_plan(params: Any, actors: Sequence[str] = ()) -> Plan:
    """IsaacGymEnvs' randomization_params, checked: one line naming the first key that is wrong (a distribution,
    operation or schedule not in the schema, a range with min > max, a negative frequency, a scaling that can
    reach 0 for a quantity that must stay positive). actors: the actor names the task knows (empty: not checked)."""
    if not isinstance(params, Mapping):
        raise UserError(f"{PREFIX}={params!r} must be a mapping (IsaacGymEnvs' randomization_params)")
    known = ("frequency", "observations", "actions", "sim_params", "actor_params")
    _no_unknown(params, known, PREFIX)
    frequency = params.get("frequency", 1)
    if not isinstance(frequency, int) or isinstance(frequency, bool) or frequency < 0:
        raise UserError(f"{PREFIX}.frequency={frequency!r} is outside its domain: an integer in [0, inf) (frames "
                        "between re-draws)")
    noise = {}
    for name in ("observations", "actions"):
        if name in params:
            noise[name] = _draw(params[name], f"{PREFIX}.{name}", NOISE_KEYS, NOISE_DISTRIBUTIONS)
    unsupported: List[str] = []
    gravity = None
    for attr, spec in (params.get("sim_params") or {}).items():
        if attr == "gravity":
            gravity = _draw(spec, f"{PREFIX}.sim_params.gravity", DRAW_KEYS, DISTRIBUTIONS)
        else:
            unsupported.append(f"sim_params.{attr}")
    plan_actors: Dict[str, Dict[Tuple[str, str], Draw]] = {}
    for actor, properties in (params.get("actor_params") or {}).items():
        key = f"{PREFIX}.actor_params.{actor}"
        if actors and actor not in actors:
            raise UserError(f"{key}: this task has no actor {actor!r} (its actors: {', '.join(actors)})")
        if not isinstance(properties, Mapping):
            raise UserError(f"{key}={properties!r} must map properties to their randomisation")
        draws: Dict[Tuple[str, str], Draw] = {}
        for prop, attrs in properties.items():
            if prop == "scale":  # (one draw for the whole actor: no attributes)
                draw = _draw(attrs, f"{key}.scale", DRAW_KEYS, DISTRIBUTIONS)
                _keep_positive(draw, original=1.0)
                draws[(prop, "")] = draw
                continue
            if prop not in SUPPORTED:
                unsupported.append(f"actor_params.{actor}.{prop}")  # (color: no counterpart here)
                continue
            if not isinstance(attrs, Mapping):
                raise UserError(f"{key}.{prop}={attrs!r} must map attributes to their randomisation")
            for attr, spec in attrs.items():
                if attr not in SUPPORTED[prop]:
                    raise UserError(f"{key}.{prop}.{attr}: IsaacGymEnvs' {prop} has no attribute {attr!r} (known: "
                                    f"{', '.join(SUPPORTED[prop])})")
                draw = _draw(spec, f"{key}.{prop}.{attr}", DRAW_KEYS, DISTRIBUTIONS)
                if SUPPORTED[prop][attr] is None:
                    unsupported.append(f"actor_params.{actor}.{prop}.{attr}")
                    continue
                if attr in POSITIVE:
                    _keep_positive(draw)
                draws[(prop, attr)] = draw
        plan_actors[actor] = draws
    return Plan(frequency, noise, gravity, plan_actors, unsupported)


def _no_unknown(tree: Mapping[str, Any], known: Sequence[str], key: str) -> None:
    for name in tree:
        if name not in known:
            raise UserError(f"{key}.{name}: not a key of IsaacGymEnvs' randomisation schema here (known: "
                            f"{', '.join(known)})")


def _draw(spec: Any, key: str, keys: Sequence[str], distributions: Sequence[str]) -> Draw:
    if not isinstance(spec, Mapping):
        raise UserError(f"{key}={spec!r} must be a mapping of {', '.join(keys)}")
    _no_unknown(spec, keys, key)
    for needed in ("range", "operation", "distribution"):
        if needed not in spec:
            raise UserError(f"{key}.{needed} is missing (IsaacGymEnvs' schema needs range, operation and "
                            "distribution)")
    if spec["distribution"] not in distributions:
        raise UserError(f"{key}.distribution={spec['distribution']!r} is outside its domain: one of "
                        f"{', '.join(distributions)}")
    if spec["operation"] not in OPERATIONS:
        raise UserError(f"{key}.operation={spec['operation']!r} is outside its domain: one of {', '.join(OPERATIONS)}")
    low, high = _pair(spec["range"], f"{key}.range", spec["distribution"])
    correlated = (0.0, 0.0)
    if "range_correlated" in spec:
        correlated = _pair(spec["range_correlated"], f"{key}.range_correlated", spec["distribution"])
    schedule = spec.get("schedule")
    steps = spec.get("schedule_steps", 1)
    if schedule is not None and schedule not in SCHEDULES:
        raise UserError(f"{key}.schedule={schedule!r} is outside its domain: one of {', '.join(SCHEDULES)} or absent")
    if schedule is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1):
        raise UserError(f"{key}.schedule_steps={steps!r} is outside its domain: an integer in [1, inf) (a schedule "
                        "needs it)")
    buckets = spec.get("num_buckets", 0)
    if not isinstance(buckets, int) or isinstance(buckets, bool) or buckets < 0:
        raise UserError(f"{key}.num_buckets={buckets!r} is outside its domain: an integer in [0, inf)")
    setup_only = spec.get("setup_only", False)
    if not isinstance(setup_only, bool):
        raise UserError(f"{key}.setup_only={setup_only!r} is outside its domain: true or false")
    return Draw(key, low, high, spec["operation"], spec["distribution"], schedule, int(steps), setup_only,
                buckets, correlated)


def _pair(value: Any, key: str, distribution: str) -> Tuple[float, float]:
    if not (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
        raise UserError(f"{key}={value!r} must be a pair of finite numbers")
    low, high = float(value[0]), float(value[1])
    if distribution == "gaussian":
        if high < 0:
            raise UserError(f"{key}={list(value)!r}: a gaussian's range is [mean, deviation], the deviation >= 0")
    elif low > high:
        raise UserError(f"{key}={list(value)!r}: min > max")
    if distribution == "loguniform" and low <= 0:
        raise UserError(f"{key}={list(value)!r}: a loguniform range must lie above 0")
    return low, high


def _keep_positive(draw: Draw, original: Optional[float] = None) -> None:
    """A scaling of a quantity that must stay > 0 (mass, friction, scale) must not reach 0: a gaussian always can; a
    uniform range from <= 0 can. An additive draw is checked against the original value when it is known here
    (scale's 1), else against the model's values when the env is built."""
    if draw.operation == "additive" and original is not None:
        if draw.distribution == "gaussian" or original + draw.low <= 0:
            raise UserError(f"{draw.key}: an additive {draw.distribution} [{draw.low}, {draw.high}] can take "
                            f"{original:g} to 0 or below: narrow it, or scale it")
        return
    if draw.operation != "scaling":
        return
    if draw.distribution == "gaussian" or draw.low <= 0:
        raise UserError(f"{draw.key}: a scaling that can reach 0 or below ({draw.distribution} "
                        f"[{draw.low}, {draw.high}]) for a quantity that must stay positive: use a uniform or "
                        "loguniform range above 0")
