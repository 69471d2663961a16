"""Arms and hands (FrankaCabinet, ShadowHand): a fixed-base robot under joint-position targets that moves objects,
with the forward kinematics they share (kinematics.py), each task's spec in its module and its model in assets/.
Key names are IsaacGymEnvs'."""
