"""What the two Franka tasks (FrankaCabinet, FrankaCubeStack) share of their arm: its joints' names and indices,
and the stiff contacts its fingers grip with."""
from __future__ import annotations

from typing import Any, Sequence, Tuple

import torch

ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8)) + ("panda_finger_joint1", "panda_finger_joint2")


def stiffen(model: Any, geom_names: Sequence[str]) -> None:
    """The named geoms' contacts at the stiffest time constant MuJoCo's refsafe rule keeps stable, 2 x the physics
    step (the others keep mujoco.contact_timeconst): MuJoCo's contact stiffness scales with the inertia behind it,
    and the fingers must hold IsaacGymEnvs' squeeze without sinking into what they hold (the model files' headers)."""
    grip = [g for g in range(model.ngeom) if model.geom(g).name in geom_names]
    model.geom_solref[grip, 0] = 2.0 * model.opt.timestep


def arm_joints(model: Any, device: Any) -> Tuple[torch.Tensor, ...]:
    """The arm's 9 joints (7 arm, 2 fingers): their qpos and qvel columns and their lower and upper limits."""
    joints = [model.joint(name) for name in ARM_JOINTS]
    return (torch.tensor([int(j.qposadr[0]) for j in joints], device=device),
            torch.tensor([int(j.dofadr[0]) for j in joints], device=device),
            torch.tensor([float(j.range[0]) for j in joints], device=device),
            torch.tensor([float(j.range[1]) for j in joints], device=device))
