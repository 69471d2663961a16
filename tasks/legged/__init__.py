"""Legged robots under velocity commands (Anymal, AnymalTerrain): what legged tasks share (common.py: PD joint
targets, commands, base-frame velocities, projected gravity, contact forces on named bodies, feet air time, the
parameter domains of what it reads) with each robot's model, reward, reset and spec in its own module and assets/
file. Key names are IsaacGymEnvs' (env.control.*, env.learn.*, ...), so that sim=isaacgym hands the same
overrides to its task."""
