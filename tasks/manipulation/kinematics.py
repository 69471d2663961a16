"""Forward kinematics in torch from qpos, for chains of hinge and slide joints (an arm, a hand, a drawer).

Why not MuJoCo's own xpos: a plain mj_step computes the kinematics before it integrates, so after a step xpos and
xquat describe the previous state (mujoco.batch and MuJoCo Warp alike), where Isaac Gym's refreshed rigid-body
states are the new one; a forward pass after every step would cost a second collision detection. The poses of a
few bodies from the state rows are a handful of 3 x 3 products, on either simulator, in float32.

Orientations come both as matrices and as quaternions composed along the chain (as MuJoCo's own xquat is): a
quaternion read back from a float32 matrix by square roots is off by sqrt(float32's epsilon), ~2e-4, in a component
near zero, and its signs are guesses near a half turn (the GPU kit's fifth proof found the first on CUDA).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import torch


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Products of (x, y, z, w) quaternions."""
    ax, ay, az, aw = a.unbind(-1)
    bx, by, bz, bw = b.unbind(-1)
    return torch.stack((aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                        aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz), dim=-1)


def axis_angle_quat(angle: torch.Tensor, axis: torch.Tensor) -> torch.Tensor:
    """(x, y, z, w) quaternions of turns by angle (n,) about a unit axis ((3,) or (n, 3))."""
    half = 0.5 * angle[:, None]
    return torch.cat((axis * torch.sin(half), torch.cos(half)), dim=-1)


def rotation_matrix(quat_wxyz: Sequence[float]) -> np.ndarray:
    w, x, y, z = (float(v) for v in quat_wxyz)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


class Kinematics:
    """World poses (position (envs, 3), rotation matrix (envs, 3, 3), (x, y, z, w) quaternion (envs, 4)) of named
    bodies and their ancestors, from qpos. Every joint on the way must be a hinge or a slide anchored at its body's origin (the MJCF writes them so);
    other chains are refused when built."""

    def __init__(self, model: Any, bodies: Sequence[str], device: torch.device):
        import mujoco

        wanted = {model.body(name).id for name in bodies}
        chain = set()
        for body in wanted:
            while body != 0:
                chain.add(body)
                body = int(model.body_parentid[body])
        self.order = sorted(chain)  # (MuJoCo numbers bodies in tree order: a parent before its children)
        self.names = {model.body(b).name: b for b in wanted}
        self.parent = {b: int(model.body_parentid[b]) for b in self.order}
        self.offset = {b: (torch.tensor(model.body_pos[b], dtype=torch.float32, device=device),
                           torch.tensor(rotation_matrix(model.body_quat[b]), dtype=torch.float32, device=device),
                           torch.tensor(np.roll(model.body_quat[b], -1), dtype=torch.float32, device=device))
                       for b in self.order}  # (MuJoCo's quaternions are (w, x, y, z); these (x, y, z, w))
        self.joints: Dict[int, list] = {}
        hinge, slide = int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)
        for b in self.order:
            joints = []
            for j in range(int(model.body_jntadr[b]), int(model.body_jntadr[b]) + int(model.body_jntnum[b])):
                kind = int(model.jnt_type[j])
                if kind not in (hinge, slide) or np.abs(model.jnt_pos[j]).max() > 0:
                    raise ValueError(f"Kinematics: joint {model.joint(j).name} is not a hinge or slide at its body's "
                                     "origin")
                axis = torch.tensor(model.jnt_axis[j], dtype=torch.float32, device=device)
                cross = torch.tensor([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]],
                                     device=device)
                joints.append((kind == hinge, int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j]), axis, cross,
                               cross @ cross))
            self.joints[b] = joints

    def __call__(self, qpos: torch.Tensor) -> Dict[str, Tuple[torch.Tensor, torch.Tensor]]:
        return {name: (pos, rot) for name, (pos, rot, _, _, _) in self.states(qpos).items()}

    def states(self, qpos: torch.Tensor, qvel: Optional[torch.Tensor] = None
               ) -> Dict[str, Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
        """(position, rotation matrix, (x, y, z, w) quaternion, linear velocity of the body's origin, angular
        velocity), world frame, of each named body; the velocities zero without qvel. The quaternion is MuJoCo's
        xquat's: composed joint by joint, continuous in the joints, its sign not chosen afterwards."""
        q = qpos.float()
        n = q.shape[0]
        v = qvel.float() if qvel is not None else None
        eye = torch.eye(3, device=q.device).expand(n, 3, 3)
        zero = torch.zeros(n, 3, device=q.device)
        identity = torch.tensor([0.0, 0.0, 0.0, 1.0], device=q.device).expand(n, 4)
        states: Dict[int, Tuple[torch.Tensor, ...]] = {0: (zero, eye, identity, zero, zero)}
        for b in self.order:
            parent_pos, parent_rot, parent_quat, parent_lin, parent_ang = states[self.parent[b]]
            local_pos, local_rot, local_quat = self.offset[b]
            pos = parent_pos + parent_rot @ local_pos
            rot = parent_rot @ local_rot
            quat = quat_mul(parent_quat, local_quat.expand(n, 4))
            lin = parent_lin + torch.cross(parent_ang, pos - parent_pos, dim=1)
            ang = parent_ang
            for is_hinge, adr, dof, axis, cross, cross2 in self.joints[b]:
                value = q[:, adr]
                axis_world = rot @ axis
                if is_hinge:  # Rodrigues: I + sin K + (1 - cos) K^2
                    sin, versin = torch.sin(value)[:, None, None], (1 - torch.cos(value))[:, None, None]
                    rot = rot @ (eye + sin * cross + versin * cross2)
                    quat = quat_mul(quat, axis_angle_quat(value, axis))
                    if v is not None:
                        ang = ang + axis_world * v[:, dof, None]
                else:
                    pos = pos + axis_world * value[:, None]
                    if v is not None:
                        lin = lin + axis_world * v[:, dof, None]
            states[b] = (pos, rot, quat, lin, ang)
        return {name: states[b] for name, b in self.names.items()}
