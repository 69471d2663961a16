"""The classic control tasks (Cartpole): a few joints, no contacts, obs and reward in closed form.

DOMAINS: what each task's own parameters may hold (config/domains.py), checked before anything is built; torch-free
here so that a refused config never waits for torch to import."""
from isaac_ppo.config.domains import positive

# a motor's effort below 0 turns it around; a reset distance of 0 ends every episode at once
DOMAINS = {"Cartpole": {"env.maxEffort": positive(), "env.resetDist": positive()}}
