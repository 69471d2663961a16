"""Plan: how one batch is collected and learned from; Scheduler: who decides the next one; the registry.

A scheduler is built from the config's `scheduler` node: its `_target_` names the class (ours in
cfg/scheduler/*.yaml, or a user's own), every other key is a constructor argument, and the task's agent
config gives the base plan (num_envs x agent.horizon, agent.mini_epochs, agent.minibatch_size).
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Dict, Iterator, List, Mapping, Optional

from isaac_ppo.errors import UserError

MODES = ("sync", "concurrent")


@dataclasses.dataclass(frozen=True)
class Plan:
    num_envs: int  # active envs stepped for this batch
    rollout_length: int  # steps per env (horizon)
    epochs: int  # passes over the batch
    minibatch_size: int  # samples per gradient step
    mode: str = "sync"  # sync | concurrent: collect the next batch while this one is learned from

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.rollout_length

    @property
    def num_minibatches(self) -> int:
        return self.batch_size // self.minibatch_size

    def resized(self, num_envs: int, rollout_length: int, epochs: Optional[int] = None,
                minibatches: Optional[int] = None) -> "Plan":
        """This plan with another split; the minibatch count stays (CleanRL's num_minibatches, the seed
        paper's harness) unless `minibatches` is given. When this plan's own minibatch size does not divide
        its batch (a base plan that is never run), the size stays instead and check() judges it."""
        batch = int(num_envs) * int(rollout_length)
        if not minibatches and (self.minibatch_size < 1 or self.batch_size % self.minibatch_size):
            return dataclasses.replace(
                self, num_envs=int(num_envs), rollout_length=int(rollout_length),
                epochs=self.epochs if epochs is None else int(epochs),
            )
        count = int(minibatches or self.num_minibatches)
        if count < 1 or batch % count:
            raise UserError(
                f"{count} minibatches (scheduler.minibatches, else the base plan's count) do not divide the batch "
                f"num_envs x rollout_length = {num_envs} x {rollout_length} = {batch}"
            )
        return dataclasses.replace(
            self, num_envs=int(num_envs), rollout_length=int(rollout_length),
            epochs=self.epochs if epochs is None else int(epochs), minibatch_size=batch // count,
        )

    def check(self, pool_size: int, where: str = "") -> "Plan":
        """Refuse a plan that cannot run with one line naming the keys; `where` says which plan it is."""
        at = f" ({where})" if where else ""
        if self.mode not in MODES:
            raise UserError(f"scheduler.mode={self.mode!r} is not one of: {', '.join(MODES)}")
        if self.num_envs < 1 or self.num_envs > pool_size:
            raise UserError(
                f"num_envs={self.num_envs} must be within 1..{pool_size}, the env pool{at}: "
                f"raise num_envs (the pool) or ask for fewer envs"
            )
        if self.rollout_length < 1:
            raise UserError(f"rollout_length={self.rollout_length} (agent.horizon, or the scheduler's) must be at least 1{at}")
        if self.epochs < 1:
            raise UserError(f"epochs={self.epochs} (agent.mini_epochs, or the scheduler's) must be at least 1{at}")
        if self.minibatch_size < 1 or self.batch_size % self.minibatch_size:
            raise UserError(
                f"the minibatch (agent.minibatch_size={self.minibatch_size}, or scheduler.minibatches) must divide "
                f"the batch num_envs x rollout_length = {self.num_envs} x {self.rollout_length} = "
                f"{self.batch_size}{at}: sizes that do (the nearest): "
                f"{nearest_divisors(self.batch_size, self.minibatch_size)}; or give "
                f"agent.num_mini_batches=N, which follows the batch"
            )
        return self


class Scheduler:
    """Decides the Plan of iteration k. Subclasses override plan() and, when they keep any, the state.

    The runner calls plan(k, history) exactly once per iteration, in order; observe(k, stats, diag) after
    iteration k's update (stats: that iteration's metrics row, diag: the diagnostics measured then, often
    empty). With concurrent collection plan(k + 1) is asked before observe(k): the next batch is already
    being collected while iteration k learns.
    """

    def __init__(self, base: Plan, mode: str = "sync"):
        self.base = dataclasses.replace(base, mode=mode)
        self._events: List[str] = []

    def plan(self, k: int, history: List[Mapping[str, Any]]) -> Plan:
        return self.base

    def observe(self, k: int, stats: Mapping[str, Any], diag: Mapping[str, Any]) -> None:
        """Told what iteration k measured; schedules that do not listen ignore it."""

    def reachable_plans(self, max_iterations: int, max_env_steps: Optional[int]) -> Iterator[Plan]:
        """Every plan this scheduler can ask for in the run: sizes the env pool and is checked at start."""
        yield self.base

    def most_envs(self, max_iterations: Optional[int], max_env_steps: Optional[int]) -> int:
        """The env pool this scheduler needs. It should not depend on the budgets when the scheduler can
        go further: a run resumed with a larger budget must find the same pool in its checkpoint."""
        return max(plan.num_envs for plan in self.reachable_plans(max_iterations, max_env_steps))

    def log(self, message: str) -> None:
        """Record a decision (with its reason) for the run's log."""
        self._events.append(message)

    def take_events(self) -> List[str]:
        events, self._events = self._events, []
        return events

    def state_dict(self) -> Dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass


def base_plan(cfg: Any) -> Plan:
    """The task's own plan: num_envs (else task.env.numEnvs) x agent.horizon, agent.mini_epochs, minibatch."""
    agent = cfg.agent
    num_envs = cfg.num_envs if cfg.num_envs is not None else cfg.task.env.numEnvs
    return Plan(int(num_envs), agent.horizon, agent.mini_epochs, agent_minibatch_size(cfg, int(num_envs)))


def agent_minibatch_size(cfg: Any, num_envs: int) -> int:
    """agent.minibatch_size, or with agent.num_mini_batches (rsl_rl's form) the batch num_envs x agent.horizon
    split into that many: the minibatch then follows the batch when num_envs changes."""
    agent = cfg.agent
    count = agent.get("num_mini_batches")
    if not count:
        return agent.minibatch_size
    batch = num_envs * agent.horizon
    if batch % count:
        raise UserError(f"agent.num_mini_batches={count} does not divide the batch num_envs x agent.horizon = "
                        f"{num_envs} x {agent.horizon} = {batch}: counts that do (the nearest): "
                        f"{nearest_divisors(batch, count)}")
    return batch // count


def nearest_divisors(n: int, near: int, shown: int = 6) -> str:
    """The divisors of n nearest to `near` (in order), for a refusal that says which values would do."""
    divisors = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    divisors = sorted(set(divisors + [n // d for d in divisors]))
    return ", ".join(str(d) for d in sorted(sorted(divisors, key=lambda d: (abs(d - near), d))[:shown]))


def build_scheduler(cfg: Any) -> Scheduler:
    """The scheduler of cfg.scheduler (`_target_` plus constructor arguments) over the task's base plan."""
    node = {str(k): v for k, v in _plain(cfg.scheduler).items()}
    target = node.pop("_target_", None)
    node.pop("name", None)
    if not target or "." not in str(target):
        raise UserError(f"scheduler._target_={target!r} must name a class, e.g. isaac_ppo.scheduler.fixed.FixedScheduler")
    module_name, _, class_name = str(target).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, TypeError, ValueError) as error:  # (a relative or empty module name: the
        raise UserError(f"scheduler._target_={target}: cannot import it ({error})") from None  # last two)
    if not (isinstance(cls, type) and issubclass(cls, Scheduler)):
        raise UserError(f"scheduler._target_={target} is not a subclass of isaac_ppo.scheduler.Scheduler")
    try:
        return cls(base_plan(cfg), **node)
    except TypeError as error:
        raise UserError(f"scheduler ({target}): {error}") from None


def pool_size(cfg: Any, scheduler: Scheduler, max_iterations: int, max_env_steps: Optional[int]) -> int:
    """The env pool: num_envs when given, else the most envs the scheduler can ask for in any run."""
    if cfg.num_envs is not None:
        return cfg.num_envs
    return scheduler.most_envs(max_iterations, max_env_steps)


def check_plans(scheduler: Scheduler, pool: int, max_iterations: int, max_env_steps: Optional[int]) -> None:
    """Refuse, before anything runs, any plan the scheduler could ask for that cannot run on this pool."""
    for plan in scheduler.reachable_plans(max_iterations, max_env_steps):
        plan.check(pool, f"a plan of scheduler {type(scheduler).__name__}")


def _plain(node: Any) -> Dict[str, Any]:
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(node):
            return OmegaConf.to_container(node, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf ships with hydra, a dependency
        pass
    return dict(node)
