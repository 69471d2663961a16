"""The Hydra configuration tree, shipped as isaac_ppo.cfg (config_path="pkg://isaac_ppo.cfg")."""
