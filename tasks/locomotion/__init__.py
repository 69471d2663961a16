"""Locomotion tasks that run toward a target (Ant, Humanoid): IsaacGymEnvs' shared observation, reward, reset and
parameter domains (common.py) with each robot's model and scales in its own module and assets/ file."""
