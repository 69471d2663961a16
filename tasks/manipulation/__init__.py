"""Arms and hands (FrankaCabinet): a fixed-base robot under joint-position targets that moves objects, with the
forward kinematics they share (kinematics.py) and each task's model in assets/.

DOMAINS: what each task's own parameters may hold (config/domains.py), checked before anything is built; torch-free
here so that a refused config never waits for torch to import. Key names are IsaacGymEnvs'."""
from isaac_ppo.config.domains import integer, positive, real

# FrankaCabinet: at most the 16 props IsaacGymEnvs lays out in the drawer (4 x 4); the action and velocity scales
# positive (0 would freeze the arm or blind the policy); the reward's weights pay at 0 or above, and its action
# penalty is subtracted (a negative one would pay for effort)
FRANKA_CABINET = {
    "env.numProps": integer(0, 16), "env.actionScale": positive(), "env.dofVelocityScale": positive(),
    **{f"env.{key}": real(0.0) for key in ("distRewardScale", "rotRewardScale", "aroundHandleRewardScale",
                                           "openRewardScale", "fingerDistRewardScale", "actionPenaltyScale")},
}
DOMAINS = {"FrankaCabinet": FRANKA_CABINET}
