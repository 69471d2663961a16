"""Arms and hands (FrankaCabinet, ShadowHand): a fixed-base robot under joint-position targets that moves objects, with the
forward kinematics they share (kinematics.py) and each task's model in assets/.

DOMAINS: what each task's own parameters may hold (config/domains.py), checked before anything is built; torch-free
here so that a refused config never waits for torch to import. Key names are IsaacGymEnvs'."""
from isaac_ppo.config.domains import boolean, choice, integer, positive, real, thresholds

# FrankaCabinet: at most the 16 props IsaacGymEnvs lays out in the drawer (4 x 4); the action and velocity scales
# positive (0 would freeze the arm or blind the policy); the reward's weights pay at 0 or above, and its action
# penalty is subtracted (a negative one would pay for effort)
FRANKA_CABINET = {
    "env.numProps": integer(0, 16), "env.actionScale": positive(), "env.dofVelocityScale": positive(),
    "env.openEndsEpisode": boolean(), "eval_env.env.openEndsEpisode": boolean(), "mujoco.velocity_limits": boolean(),
    "solve_measures.drawer_opened": thresholds(0.0, 1.0),  # (a share of evaluation episodes)
    **{f"env.{key}": real(0.0) for key in ("distRewardScale", "rotRewardScale", "aroundHandleRewardScale",
                                           "openRewardScale", "fingerDistRewardScale", "actionPenaltyScale")},
}
# ShadowHand: IsaacGymEnvs' observation types; a success tolerance and a fall distance above 0;
# the moving average's weight in (0, 1]; the reward's signed scales as IsaacGymEnvs has them (distance and action
# penalties at 0 or below, the rotation pay and success bonus at 0 or above, a fall penalty at 0 or below)
SHADOW_HAND = {
    "env.observationType": choice("openai", "full_no_vel", "full", "full_state"), "env.objectType": choice("block"),
    "env.asymmetric_observations": boolean(), "env.useRelativeControl": boolean(), "env.dofSpeedScale": positive(),
    "env.actionsMovingAverage": real(0.0, 1.0), "env.controlFrequencyInv": integer(1, 1),
    "env.resetPositionNoise": real(0.0), "env.resetDofPosRandomInterval": real(0.0, 1.0),
    "env.resetDofVelRandomInterval": real(0.0),
    "env.distRewardScale": real(None, 0.0), "env.rotRewardScale": real(0.0), "env.rotEps": positive(),
    "env.actionPenaltyScale": real(None, 0.0), "env.reachGoalBonus": real(0.0), "env.fallDistance": positive(),
    "env.fallPenalty": real(None, 0.0), "env.successTolerance": positive(), "env.maxConsecutiveSuccesses": integer(0),
    "env.averFactor": real(0.0, 1.0),
    "solve_measures.successes": thresholds(0.0),  # (goals reached per evaluation episode)
}
DOMAINS = {"FrankaCabinet": FRANKA_CABINET, "ShadowHand": SHADOW_HAND}
