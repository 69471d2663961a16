"""The fixed plan: the same batch every iteration (IsaacGymEnvs' behaviour)."""
from __future__ import annotations

from typing import Any, List, Mapping

from isaac_ppo.scheduler.plan import Plan, Scheduler


class FixedScheduler(Scheduler):
    def __init__(self, plan: Plan):
        self._plan = plan

    def plan(self, k: int, history: List[Mapping[str, Any]]) -> Plan:
        return self._plan
