"""The classic control tasks (Cartpole, BallBalance): a few joints, obs and reward in closed form.

DOMAINS: what each task's own parameters may hold (config/domains.py), checked before anything is built; torch-free
here so that a refused config never waits for torch to import."""
from isaac_ppo.config.domains import boolean, integer, positive

# a motor's effort below 0 turns it around; a reset distance of 0 ends every episode at once; BallBalance's episode
# is maxEpisodeLength control steps (IsaacGymEnvs' key), and a speed scale of 0 would make every action do nothing
DOMAINS = {
    "Cartpole": {"env.maxEffort": positive(), "env.resetDist": positive()},
    "BallBalance": {"env.maxEpisodeLength": integer(1), "env.actionSpeedScale": positive(),
                    "env.asymmetric_observations": boolean()},
}
