"""The PPO agent: actor-critic model, normalisers, rollout buffer with GAE, and the update."""
