"""Arms and hands (FrankaCabinet, FrankaCubeStack, ShadowHand, AllegroHand): a fixed-base robot under joint-position
targets that moves objects, with the forward kinematics they share (kinematics.py) and what the two hands share
(hand.py), each task's spec in its module and its model in assets/. Key names are IsaacGymEnvs'."""
