"""The classic control tasks (Cartpole): a few joints, no contacts, obs and reward in closed form."""
