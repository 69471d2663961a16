"""Collection plans: how the next batch is collected (envs x rollout length, epochs, minibatches, mode)."""
from __future__ import annotations

from isaac_ppo.scheduler.fixed import FixedScheduler
from isaac_ppo.scheduler.plan import Plan, Scheduler, base_plan, build_scheduler, check_plans, pool_size

__all__ = ["Plan", "Scheduler", "FixedScheduler", "base_plan", "build_scheduler", "check_plans", "pool_size"]
