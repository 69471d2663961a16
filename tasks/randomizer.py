"""The randomisation a task's config declares (randomization.py reads and checks it), applied to its env pool: the
per-env model fields it draws, gravity, and the noise on actions and observations. MujocoTask owns one when its
config says `task.randomize: true` (tasks/base.py); the module docstring of randomization.py says what maps to
what, and when it is drawn."""
from __future__ import annotations

import dataclasses
import sys
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch

from isaac_ppo.errors import UserError
from isaac_ppo.tasks.randomization import PREFIX, Draw, Plan, read_plan

# model fields MuJoCo derives from those drawn here (its set_const): per env too, so that each env's follow its own
MASS_FIELDS = ("body_mass", "body_inertia", "dof_armature")
DERIVED = ("body_subtreemass", "body_invweight0", "dof_invweight0", "tendon_invweight0", "actuator_acc0")
SEED_OFFSET = 1_000_003  # (the draws' generator: another stream than the reset noise's, from the same seed)
_SAID: set = set()  # (task, what is not applied) lines this process has printed: a run builds its training and
# its evaluation envs, each with a Randomizer, and the line is said once


@dataclasses.dataclass
class Target:
    """One draw's elements in the model: the original values (k,), and where each new value is written, as
    (field, index into the field past the env dimension, factor)."""

    draw: Draw
    original: torch.Tensor
    writes: List[Tuple[str, Tuple[Any, ...], float]]
    inertia_of: Optional[np.ndarray] = None  # (mass: the bodies whose inertia scales with it)
    actor: str = ""
    # scale (one value per env, original 1): fields times s from their values before any draw, (field, index) each,
    # and the bodies whose mass and inertia follow s^3 and s^5
    geometry: Optional[List[Tuple[str, Tuple[Any, ...]]]] = None
    bodies: Optional[np.ndarray] = None
    base: List[torch.Tensor] = dataclasses.field(default_factory=list)


def randomizer_of(task: Any) -> Optional["Randomizer"]:
    """The task's Randomizer when its config turns randomisation on (task.randomize), else None."""
    node = task.cfg.get("task") or {}
    if not node.get("randomize", False):
        return None
    actors = dict(getattr(task.spec, "actors", {}) or {})
    if "randomization_params" not in node:
        raise UserError(f"task.task.randomize=true: task {task.spec.name} has no {PREFIX} block (IsaacGymEnvs' has "
                        "none either): give one, or leave randomize false")
    return Randomizer(task, read_plan(node["randomization_params"], tuple(actors)), actors)


class Randomizer:
    def __init__(self, task: Any, plan: Plan, actors: Mapping[str, str]):
        self.plan = plan
        self.num_envs = task.num_envs
        self.frames_per_step = int(task.cfg["env"].get("controlFrequencyInv", 1))
        self.targets: List[Target] = []
        for actor, draws in plan.actors.items():
            for (prop, attr), draw in draws.items():
                for target in targets_of(task.model, actors[actor], prop, attr, draw):
                    self.targets.append(dataclasses.replace(target, actor=actor))
        self.scaled_actors = sorted({t.actor for t in self.targets if t.geometry is not None})
        fields = {field for t in self.targets for field, _, _ in t.writes}
        fields |= {field for t in self.targets for field, _ in (t.geometry or ())}
        if any(t.inertia_of is not None for t in self.targets) or self.scaled_actors:
            fields |= {"body_mass", "body_inertia"}
        self.needs_const = bool(fields & set(MASS_FIELDS))
        if self.needs_const:
            fields |= {f for f in DERIVED if getattr(task.model, f).size}
        self.fields = tuple(sorted(fields))
        self.original_gravity = torch.tensor(task.model.opt.gravity, dtype=torch.float64)
        self.base_inertia = np.array(task.model.body_inertia)
        said = (task.spec.name, tuple(plan.unsupported))
        if plan.unsupported and said not in _SAID:  # (said once, in one line, not silently dropped)
            _SAID.add(said)
            print(f"[{task.spec.name}] randomisation: no MuJoCo counterpart, not applied: "
                  f"{', '.join(plan.unsupported)}", file=sys.stderr)

    def bind(self, task: Any, seed: int) -> None:
        """After the simulator exists: the draws' generator and the counters, on the simulation's device."""
        self.sim, self.device = task.sim, task.sim_device
        self.generator = torch.Generator(device=self.device).manual_seed(int(seed) + SEED_OFFSET)
        self.frames = 0  # IsaacGymEnvs' frame count: control steps x controlFrequencyInv, over the pool
        self.last_redraw = 0
        self.first = True
        self.steps_since = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)  # its randomize_buf
        self.noise: Dict[str, Tuple[Tuple[float, float], Tuple[float, float]]] = {}
        self.correlated: Dict[str, Optional[torch.Tensor]] = {}
        self.gravity = self.original_gravity.clone()
        # each env's scale of each scaled actor (1: as modelled), and the geometry it multiplies, as built
        self.scales = {a: torch.ones(self.num_envs, dtype=torch.float64, device=self.device) for a in self.scaled_actors}
        for target in self.targets:
            if target.geometry is not None:
                target.base = [self.sim.model_fields[f][0][index].clone() for f, index in target.geometry]

    # ----------------------------------------------------------------------------------------------
    # the step

    def count(self, n: int) -> None:
        self.frames += self.frames_per_step
        self.steps_since[:n] += 1

    def noisy(self, name: str, values: torch.Tensor, sel: Any) -> torch.Tensor:
        """IsaacGymEnvs' noise_lambda, out of place: values op (correlated + white noise), op + or x."""
        draw = self.plan.noise.get(name)
        if draw is None or name not in self.noise:
            return values
        (a, b), (ca, cb) = self.noise[name]
        corr = self.correlated.get(name)
        if corr is None:  # (drawn at the first use after a re-draw, for the whole pool; randn for both kinds)
            corr = torch.randn(self.num_envs, values.shape[1], generator=self.generator, device=self.device)
            self.correlated[name] = corr
        rows = corr[sel]
        if draw.distribution == "gaussian":
            noise = rows * cb + ca + torch.randn(values.shape, generator=self.generator, device=self.device) * b + a
        else:
            noise = rows * (cb - ca) + ca + torch.rand(values.shape, generator=self.generator,
                                                       device=self.device) * (b - a) + a
        return values * noise if draw.operation == "scaling" else values + noise

    # ----------------------------------------------------------------------------------------------
    # resets

    def on_reset(self, ids: torch.Tensor) -> None:
        """IsaacGymEnvs' apply_randomizations at a reset of envs ids: the first one draws everything for every env;
        later, the noise ranges and gravity when `frequency` frames have passed, and the actor parameters of the
        envs among ids that have stepped `frequency` control steps since their last draw."""
        frequency = self.plan.frequency
        if self.first or self.frames - self.last_redraw >= frequency:
            self._redraw_shared()
            self.last_redraw = self.frames
        if self.first:
            due = torch.arange(self.num_envs, device=self.device)
        else:
            due = ids[self.steps_since[ids] >= frequency]
        if due.numel():
            self.steps_since[due] = 0
            moved_mass = False
            for target in self.targets:
                if target.draw.setup_only and not self.first:
                    continue
                self._write(target, due)
                moved_mass = moved_mass or moves_mass(target)
            # (only what a mass, inertia, armature or scale draw changed needs MuJoCo's derived fields anew, and only
            # in the envs drawn: a re-draw of damping, stiffness, ranges or friction leaves them as they are; on
            # ShadowHand, mj_setConst over the whole pool at each re-draw cost ~4% of the env steps/s)
            if moved_mass:
                self.sim.set_const(due)
        self.first = False

    def _redraw_shared(self) -> None:
        for name, draw in self.plan.noise.items():
            self.noise[name] = (draw.bounds(self.frames), draw.bounds(self.frames, draw.correlated))
            self.correlated[name] = None
        draw = self.plan.gravity
        if draw is not None:
            sample = draw.sample((3,), self.frames, self.generator, self.device).double().cpu()
            self.gravity = draw.apply(self.original_gravity, sample)
            self.sim.set_gravity(self.gravity)

    def _write(self, target: Target, ids: torch.Tensor) -> None:
        k = target.original.numel()
        sample = target.draw.sample((ids.numel(), k), self.frames, self.generator, self.device)
        values = target.draw.apply(target.original.to(self.device), sample)
        if target.geometry is not None:
            self._scale(target, ids, values[:, 0])
            return
        fields = self.sim.model_fields
        # (an actor's scale multiplies its drawn masses by s^3 and inertias by s^5)
        scale = self.scales[target.actor][ids] if target.actor in self.scales else None
        for field, index, factor in target.writes:
            view = fields[field]
            new = values * factor if scale is None or field != "body_mass" else values * scale[:, None] ** 3
            view[(ids.to(view.device)[:, None],) + index] = new.to(view.device, view.dtype)
        if target.inertia_of is not None:  # (IsaacGymEnvs recomputes the inertia: it scales with the mass)
            ratio = values / target.original.to(self.device)
            if scale is not None:
                ratio = ratio * scale[:, None] ** 5
            inertia = fields["body_inertia"]
            ratio = ratio.to(inertia.device)
            bodies = torch.as_tensor(target.inertia_of, device=ratio.device)
            original = torch.as_tensor(self.base_inertia[target.inertia_of], device=inertia.device)
            inertia[ids.to(inertia.device)[:, None], bodies] = (original * ratio[..., None]).to(inertia.dtype)

    def _scale(self, target: Target, ids: torch.Tensor, s: torch.Tensor) -> None:
        """IsaacGymEnvs' set_actor_scale(s) for envs ids: the geometry and the positions inside the actor times s
        from their built values; masses and inertias times the change of s cubed and to the fifth (constant
        density, PhysX's rule), so that a mass draw on the same bodies stays in them."""
        fields = self.sim.model_fields
        change = s / self.scales[target.actor][ids]
        self.scales[target.actor][ids] = s
        for (field, index), base in zip(target.geometry, target.base):
            view = fields[field]
            factor = s.to(view.device, view.dtype).view(-1, *([1] * base.dim()))
            view[(ids.to(view.device)[:, None],) + index] = base[None] * factor
        for field, power in (("body_mass", 3), ("body_inertia", 5)):
            view = fields[field]
            rows = (ids.to(view.device)[:, None], torch.as_tensor(target.bodies, device=view.device))
            factor = (change ** power).to(view.device, view.dtype).view(-1, *([1] * (view.dim() - 1)))
            view[rows] = view[rows] * factor

    # ----------------------------------------------------------------------------------------------
    # resume

    def state_dict(self) -> Dict[str, Any]:
        return {"generator": self.generator.get_state(), "frames": self.frames, "last_redraw": self.last_redraw,
                "first": self.first, "steps_since": self.steps_since.clone(), "noise": dict(self.noise),
                "correlated": {k: (None if v is None else v.clone()) for k, v in self.correlated.items()},
                "gravity": self.gravity.clone(), "scales": {a: v.clone() for a, v in self.scales.items()},
                "fields": {f: self.sim.model_fields[f].clone() for f in self.fields}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self.frames, self.last_redraw, self.first = state["frames"], state["last_redraw"], state["first"]
        self.steps_since.copy_(state["steps_since"])
        self.noise = dict(state["noise"])
        self.correlated = dict(state["correlated"])
        self.gravity = state["gravity"].clone()
        for actor, scale in state.get("scales", {}).items():  # (absent from checkpoints before scale was applied)
            self.scales[actor].copy_(scale)
        if self.plan.gravity is not None:
            self.sim.set_gravity(self.gravity)
        for field, values in state["fields"].items():
            self.sim.model_fields[field].copy_(values)
        if self.needs_const:
            self.sim.set_const()


def moves_mass(target: Target) -> bool:
    """Whether writing target changes what MuJoCo derives from the mass fields (body_invweight0 and the others)."""
    return (target.geometry is not None or target.inertia_of is not None
            or any(field in MASS_FIELDS for field, _, _ in target.writes))


def subtree(model: Any, root: int) -> List[int]:
    """The bodies of root's subtree (root included), in model order."""
    inside = {root}
    for body in range(root + 1, model.nbody):
        if int(model.body_parentid[body]) in inside:
            inside.add(body)
    return sorted(inside)


def targets_of(model: Any, root_name: str, prop: str, attr: str, draw: Draw) -> List[Target]:
    """Where IsaacGymEnvs' (prop, attr) of the actor rooted at body root_name lands in the model (randomization.py's
    docstring): one Target per kind of write, each element its own draw."""
    import mujoco

    try:
        bodies = subtree(model, model.body(root_name).id)
    except KeyError:
        raise UserError(f"{PREFIX}: the task's actor body {root_name!r} is not in its model") from None
    body_set = set(bodies)
    joints = [j for j in range(model.njnt) if int(model.jnt_bodyid[j]) in body_set
              and int(model.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))]
    geoms = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in body_set]

    def target(original: Any, writes: List[Tuple[str, Tuple[Any, ...], float]], **extra: Any) -> List[Target]:
        values = torch.as_tensor(np.asarray(original, dtype=np.float64))
        return [Target(draw, values, writes, **extra)] if values.numel() else []

    if prop == "scale":  # (the root body's own position places the actor: not scaled)
        children = np.array(bodies[1:], dtype=np.int64)
        all_joints = np.array([j for j in range(model.njnt) if int(model.jnt_bodyid[j]) in body_set], dtype=np.int64)
        sites = np.array([s for s in range(model.nsite) if int(model.site_bodyid[s]) in body_set], dtype=np.int64)
        ids = np.array(geoms, dtype=np.int64)
        geometry = [("geom_size", (ids,)), ("geom_pos", (ids,)), ("geom_rbound", (ids,)), ("geom_aabb", (ids,)),
                    ("body_ipos", (np.array(bodies, dtype=np.int64),)), ("body_pos", (children,)),
                    ("jnt_pos", (all_joints,)), ("site_pos", (sites,))]
        return [Target(draw, torch.ones(1, dtype=torch.float64), [],
                       geometry=[(f, index) for f, index in geometry if index[0].size],
                       bodies=np.array([b for b in bodies if model.body_mass[b] > 0], dtype=np.int64))]
    if prop == "dof_properties":
        dofs = np.array([int(model.jnt_dofadr[j]) for j in joints], dtype=np.int64)
        if attr in ("stiffness", "damping"):
            servo = {int(model.actuator_trnid[a, 0]): a for a in range(model.nu)
                     if int(model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)
                     and int(model.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE)}
            driven = [j for j in joints if j in servo and (attr == "stiffness" or model.actuator_biasprm[servo[j], 2])]
            free = [j for j in joints if j not in driven]
            acts = np.array([servo[j] for j in driven], dtype=np.int64)
            if attr == "stiffness":  # kp: gainprm[0] and -biasprm[1]; else the joint's spring
                out = target(model.actuator_gainprm[acts, 0], [("actuator_gainprm", (acts, 0), 1.0),
                                                                ("actuator_biasprm", (acts, 1), -1.0)])
                spring = np.array(free, dtype=np.int64)
                return out + target(model.jnt_stiffness[spring], [("jnt_stiffness", (spring,), 1.0)])
            out = target(-model.actuator_biasprm[acts, 2], [("actuator_biasprm", (acts, 2), -1.0)])
            free_dofs = np.array([int(model.jnt_dofadr[j]) for j in free], dtype=np.int64)
            return out + target(model.dof_damping[free_dofs], [("dof_damping", (free_dofs,), 1.0)])
        if attr in ("lower", "upper"):
            limited = np.array([j for j in joints if model.jnt_limited[j]], dtype=np.int64)
            column = 0 if attr == "lower" else 1
            return target(model.jnt_range[limited, column], [("jnt_range", (limited, column), 1.0)])
        field = {"armature": "dof_armature", "friction": "dof_frictionloss"}[attr]
        return target(getattr(model, field)[dofs], [(field, (dofs,), 1.0)])
    if prop == "rigid_body_properties":  # mass
        ids = np.array([b for b in bodies if model.body_mass[b] > 0], dtype=np.int64)
        _stays_positive(draw, model.body_mass[ids])
        return target(model.body_mass[ids], [("body_mass", (ids,), 1.0)], inertia_of=ids)
    if prop == "rigid_shape_properties":
        column = {"friction": 0, "torsion_friction": 1, "rolling_friction": 2}[attr]
        ids = np.array(geoms, dtype=np.int64)
        _stays_positive(draw, model.geom_friction[ids, column])
        return target(model.geom_friction[ids, column], [("geom_friction", (ids, column), 1.0)])
    # tendon_properties: the fixed tendons whose joints are the actor's
    joint_set, joint_wrap = set(joints), int(mujoco.mjtWrap.mjWRAP_JOINT)
    tendons = []
    for t in range(model.ntendon):
        wraps = range(int(model.tendon_adr[t]), int(model.tendon_adr[t] + model.tendon_num[t]))
        if all(int(model.wrap_type[w]) == joint_wrap and int(model.wrap_objid[w]) in joint_set for w in wraps):
            tendons.append(t)
    tendons = np.array(tendons, dtype=np.int64)
    field = {"damping": "tendon_damping", "stiffness": "tendon_stiffness"}[attr]
    return target(getattr(model, field)[tendons], [(field, (tendons,), 1.0)])


def _stays_positive(draw: Draw, original: Any) -> None:
    """An additive draw on a quantity that must stay > 0 (mass, friction; friction 0 gives NaN on MuJoCo Warp):
    its range's low end must keep the smallest model value above 0; a gaussian one can always cross it."""
    if draw.operation != "additive" or not len(original):
        return
    if draw.distribution == "gaussian" or float(np.min(original)) + draw.low <= 0:
        raise UserError(f"{draw.key}: an additive {draw.distribution} [{draw.low}, {draw.high}] can take a value of "
                        f"this model (smallest {float(np.min(original)):g}) to 0 or below: narrow it, or scale it")
