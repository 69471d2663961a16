"""Legged robots under velocity commands (Anymal): what legged tasks share (common.py: PD joint targets, commands,
base-frame velocities, projected gravity, contact forces on named bodies, feet air time) with each robot's model,
reward and reset in its own module and assets/ file.

DOMAINS: what each task's own parameters may hold (config/domains.py), checked before anything is built; torch-free
here so that a refused config never waits for torch to import. Key names are IsaacGymEnvs' (env.control.*,
env.learn.*, ...), so that sim=isaacgym hands the same overrides to its task."""
import math

from isaac_ppo.config.domains import pair, positive, real

LEGS = ("LF", "LH", "RF", "RH")  # Isaac Gym's order of the ANYmal's legs (and so of its degrees of freedom)
JOINTS = ("HAA", "HFE", "KFE")  # hip abduction/adduction, hip flexion/extension, knee flexion/extension

# what common.LeggedTask reads: a command range is [min, max] in m/s or rad/s (a legged robot's commands stay well
# inside 5); the drive's stiffness must hold a position (> 0) and its damping not push (>= 0); tracking weights pay
# at 0 or above, and torqueRewardScale is IsaacGymEnvs' signed penalty (0 or below, a positive one would pay for
# torque); scales are positive; an episode lasts a positive number of seconds; a default joint angle is an angle
VELOCITY_COMMANDS = {
    "env.randomCommandVelocityRanges.linear_x": pair(-5.0, 5.0),
    "env.randomCommandVelocityRanges.linear_y": pair(-5.0, 5.0),
    "env.randomCommandVelocityRanges.yaw": pair(-5.0, 5.0),
    "env.control.stiffness": positive(), "env.control.damping": real(0.0), "env.control.actionScale": positive(),
    "env.learn.linearVelocityXYRewardScale": real(0.0), "env.learn.angularVelocityZRewardScale": real(0.0),
    "env.learn.torqueRewardScale": real(None, 0.0),
    "env.learn.linearVelocityScale": positive(), "env.learn.angularVelocityScale": positive(),
    "env.learn.dofPositionScale": positive(), "env.learn.dofVelocityScale": positive(),
    "env.learn.episodeLength_s": positive(),
}
ANYMAL = dict(VELOCITY_COMMANDS, **{f"env.defaultJointAngles.{leg}_{joint}": real(-math.pi, math.pi)
                                    for leg in LEGS for joint in JOINTS})
DOMAINS = {"Anymal": ANYMAL}
