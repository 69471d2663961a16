"""Legged robots under velocity commands (Anymal): what legged tasks share (common.py: PD joint targets, commands,
base-frame velocities, projected gravity, contact forces on named bodies, feet air time) with each robot's model,
reward and reset in its own module and assets/ file.

DOMAINS: what each task's own parameters may hold (config/domains.py), checked before anything is built; torch-free
here so that a refused config never waits for torch to import. Key names are IsaacGymEnvs' (env.control.*,
env.learn.*, ...), so that sim=isaacgym hands the same overrides to its task."""
import math

from isaac_ppo.config.domains import boolean, choice, integer, pair, positive, proportions, real

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
# what anymal_terrain.AnymalTerrain reads besides: the terrain (a map of at least one cell; its kinds' shares sum to
# 1), the decimation, every reward scale (IsaacGymEnvs' penalties at 0 or below, its pay at 0 or above; the
# terminal reward and air time's either way), noise half-widths at 0 or above, a friction range above 0 (MuJoCo Warp
# gives NaN for a friction of exactly 0), pushes at a positive interval
PENALTIES = ("linearVelocityZRewardScale", "angularVelocityXYRewardScale", "orientationRewardScale",
             "jointAccRewardScale", "baseHeightRewardScale", "kneeCollisionRewardScale", "feetStumbleRewardScale",
             "actionRateRewardScale", "hipRewardScale")
NOISES = ("noiseLevel", "dofPositionNoise", "dofVelocityNoise", "linearVelocityNoise", "angularVelocityNoise",
          "gravityNoise", "heightMeasurementNoise")
ANYMAL_TERRAIN = dict(
    ANYMAL,
    **{f"env.learn.{key}": real(None, 0.0) for key in PENALTIES},
    **{f"env.learn.{key}": real(0.0) for key in NOISES},
    **{
        "env.terrain.terrainType": choice("trimesh", "plane"), "env.terrain.staticFriction": positive(),
        "env.terrain.curriculum": boolean(), "env.terrain.maxInitMapLevel": integer(0),
        "env.terrain.mapLength": positive(), "env.terrain.mapWidth": positive(),
        "env.terrain.numLevels": integer(1), "env.terrain.numTerrains": integer(1),
        "env.terrain.terrainProportions": proportions(5), "env.terrain.seed": integer(0, optional=True),
        "env.control.decimation": integer(1),
        "env.learn.allowKneeContacts": boolean(), "env.learn.terminalReward": real(),
        "env.learn.feetAirTimeRewardScale": real(), "env.learn.heightMeasurementScale": positive(),
        "env.learn.addNoise": boolean(), "env.learn.randomizeFriction": boolean(),
        "env.learn.frictionRange": pair(0.0, 10.0, low_open=True), "env.learn.frictionBuckets": integer(1),
        "env.learn.pushRobots": boolean(), "env.learn.pushInterval_s": positive(),
        "eval_env.env.terrain.curriculum": boolean(),  # (the evaluation envs': cfg/task/AnymalTerrain.yaml)
    })
DOMAINS = {"Anymal": ANYMAL, "AnymalTerrain": ANYMAL_TERRAIN}
