"""The budget plan: hold the batch B = num_envs x rollout_length fixed and choose its split.

The harness of arXiv 2506.03404's fixed-batch comparisons:
    scheduler=budget scheduler.batch_size=65536 scheduler.num_envs=1024     (rollout_length 64)
    scheduler=budget scheduler.batch_size=65536 scheduler.rollout_length=16 (num_envs 4096)
"""
from __future__ import annotations

from typing import Optional

from isaac_ppo.errors import UserError
from isaac_ppo.scheduler.plan import Plan, Scheduler


class BudgetScheduler(Scheduler):
    def __init__(self, base: Plan, mode: str = "sync", batch_size: Optional[int] = None,
                 num_envs: Optional[int] = None, rollout_length: Optional[int] = None,
                 epochs: Optional[int] = None, minibatches: Optional[int] = None):
        super().__init__(base, mode)
        batch = _positive("scheduler.batch_size", batch_size) or base.batch_size
        num_envs = _positive("scheduler.num_envs", num_envs)
        rollout_length = _positive("scheduler.rollout_length", rollout_length)
        if num_envs and rollout_length:
            if num_envs * rollout_length != batch:
                raise UserError(
                    f"scheduler.num_envs={num_envs} x scheduler.rollout_length={rollout_length} is not "
                    f"scheduler.batch_size={batch}: give one of the two"
                )
        elif rollout_length:
            num_envs = _split(batch, rollout_length, "scheduler.rollout_length")
        else:
            num_envs = num_envs or base.num_envs
            rollout_length = _split(batch, num_envs, "scheduler.num_envs" if num_envs != base.num_envs else "num_envs")
        self.base = self.base.resized(num_envs, rollout_length, _positive("scheduler.epochs", epochs),
                                      _positive("scheduler.minibatches", minibatches))


def _split(batch: int, part: int, key: str) -> int:
    if batch % part:
        raise UserError(f"{key}={part} does not divide scheduler.batch_size={batch}: choose a divisor of it")
    return batch // part


def _positive(key: str, value: Optional[int]) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{key}={value!r} must be a positive integer (or null)")
    return value
