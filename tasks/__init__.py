"""MuJoCo ports of IsaacGymEnvs tasks (shipped as isaac_ppo.tasks), in families that share code: classic
(Cartpole, BallBalance), locomotion (Ant, Humanoid), legged (Anymal, AnymalTerrain), manipulation (FrankaCabinet,
FrankaCubeStack, ShadowHand, AllegroHand); sim/ holds the two simulators beneath them (mujoco.batch, MuJoCo Warp).

Each task is one class with its spec (a TaskSpec: isaac_ppo/envs/registry.py) in one module, its MJCF in its
family's assets/, and its task and agent YAMLs in cfg/; the task YAML's entry_point registers it. Nothing here is
imported by name from outside: make(), the config checks and the lab read the registry.
"""
