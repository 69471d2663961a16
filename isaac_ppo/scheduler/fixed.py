"""The fixed plan: the same batch every iteration (IsaacGymEnvs' behaviour, and the default)."""
from __future__ import annotations

from isaac_ppo.scheduler.plan import Scheduler


class FixedScheduler(Scheduler):
    """num_envs x agent.horizon, agent.mini_epochs, agent.minibatch_size, every iteration."""
