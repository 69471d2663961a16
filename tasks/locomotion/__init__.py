"""Locomotion tasks that run toward a target (Ant, Humanoid): IsaacGymEnvs' shared observation, reward and reset
(common.py) with each robot's model and scales in its own module and assets/ file.

DOMAINS: what each task's own parameters may hold (config/domains.py), checked before anything is built; torch-free
here so that a refused config never waits for torch to import."""
from isaac_ppo.config.domains import positive, real

# what common.LocomotionTask reads: weights and costs mean what they say at 0 or above (a negative cost would reward
# the thing); deathCost is IsaacGymEnvs' signed penalty (negative); scales and the termination height are positive
SHARED = {
    "env.headingWeight": real(0.0), "env.upWeight": real(0.0), "env.actionsCost": real(0.0),
    "env.energyCost": real(0.0), "env.jointsAtLimitCost": real(0.0), "env.deathCost": real(),
    "env.terminationHeight": positive(), "env.dofVelocityScale": positive(),
    "env.contactForceScale": positive(), "env.angularVelocityScale": positive(),
}
DOMAINS = {"Ant": SHARED, "Humanoid": SHARED}
