"""Plan: how one batch is collected and learned from; Scheduler: who decides the next one."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping

from isaac_ppo.errors import UserError


@dataclasses.dataclass(frozen=True)
class Plan:
    num_envs: int  # active envs stepped for this batch
    rollout_length: int  # steps per env (horizon)
    epochs: int  # passes over the batch
    minibatch_size: int  # samples per gradient step
    mode: str = "sync"  # sync | concurrent

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.rollout_length

    @property
    def num_minibatches(self) -> int:
        return self.batch_size // self.minibatch_size

    def check(self, pool_size: int) -> "Plan":
        """Refuse a plan that cannot run, naming the keys that make it so."""
        if self.num_envs < 1 or self.num_envs > pool_size:
            raise UserError(f"num_envs={self.num_envs} must be within 1..{pool_size} (the env pool)")
        if self.rollout_length < 1:
            raise UserError(f"agent.horizon={self.rollout_length} must be at least 1")
        if self.epochs < 1:
            raise UserError(f"agent.mini_epochs={self.epochs} must be at least 1")
        if self.minibatch_size < 1 or self.batch_size % self.minibatch_size:
            raise UserError(
                f"agent.minibatch_size={self.minibatch_size} must divide the batch num_envs x agent.horizon = "
                f"{self.num_envs} x {self.rollout_length} = {self.batch_size}"
            )
        return self


class Scheduler:
    """Decides the Plan of iteration k from the history of past iterations' statistics."""

    def plan(self, k: int, history: List[Mapping[str, Any]]) -> Plan:
        raise NotImplementedError

    def observe(self, k: int, stats: Mapping[str, Any], diag: Mapping[str, Any]) -> None:
        """Told what iteration k measured; the default scheduler does not listen."""

    def state_dict(self) -> Dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass
