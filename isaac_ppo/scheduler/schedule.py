"""Schedules over the run: num_envs, rollout_length and epochs as functions of the iteration or env steps.

Each scheduled quantity is a list of [at, value] breakpoints (`at` in iterations or env steps, by `unit`):
    scheduler=schedule scheduler.num_envs='[[0,1024],[200,4096]]' scheduler.batch_size=65536
starts with 1024 envs x 64 steps and from iteration 200 collects 4096 x 16. `interpolation: step` holds
each value until the next breakpoint; `linear` interpolates between breakpoints (and holds the ends).
With `batch_size` set, B stays fixed: exactly one of num_envs / rollout_length is scheduled and the other
is B divided by it (linear values are rounded to the nearest divisor of B). Without it, each quantity
not scheduled keeps the base plan's value and B follows.

The plan of iteration k is a pure function of k (env steps before k are the sum of the batches of the
plans before it), so a resumed run continues its schedule exactly with no state of its own.
"""
from __future__ import annotations

import bisect
import functools
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from isaac_ppo.errors import UserError
from isaac_ppo.scheduler.plan import Plan, Scheduler

UNITS = ("iterations", "env_steps")
INTERPOLATIONS = ("step", "linear")
Breakpoints = List[Tuple[int, float]]


class ScheduleScheduler(Scheduler):
    def __init__(self, base: Plan, mode: str = "sync", unit: str = "iterations", interpolation: str = "step",
                 num_envs: Any = None, rollout_length: Any = None, epochs: Any = None,
                 batch_size: Optional[int] = None, minibatches: Optional[int] = None):
        super().__init__(base, mode)
        if unit not in UNITS:
            raise UserError(f"scheduler.unit={unit!r} is not one of: {', '.join(UNITS)}")
        if interpolation not in INTERPOLATIONS:
            raise UserError(f"scheduler.interpolation={interpolation!r} is not one of: {', '.join(INTERPOLATIONS)}")
        self.unit, self.interpolation = unit, interpolation
        self.num_envs = _breakpoints("scheduler.num_envs", num_envs)
        self.rollout_length = _breakpoints("scheduler.rollout_length", rollout_length)
        self.epochs = _breakpoints("scheduler.epochs", epochs)
        self.batch_size = batch_size
        self.minibatches = minibatches
        if batch_size is not None:
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
                raise UserError(f"scheduler.batch_size={batch_size!r} must be a positive integer (or null)")
            if (self.num_envs is None) == (self.rollout_length is None):
                raise UserError(
                    "scheduler.batch_size keeps B fixed: schedule exactly one of scheduler.num_envs and "
                    "scheduler.rollout_length (the other is B divided by it)"
                )
        self._steps_before: List[int] = [0]  # env steps before iteration k, extended as plans are made
        self._plans: List[Plan] = []
        self._last: Optional[Plan] = None

    def plan(self, k: int, history: Sequence[Any] = ()) -> Plan:
        plan = self.plan_at(k)
        if self._last is None or plan != self._last:
            change = "starts with" if self._last is None else "changes to"
            self.log(f"iteration {k}: schedule {change} num_envs {plan.num_envs} x rollout_length "
                     f"{plan.rollout_length} (batch {plan.batch_size}), {plan.epochs} epochs, "
                     f"minibatch {plan.minibatch_size}")
        self._last = plan
        return plan

    def plan_at(self, k: int) -> Plan:
        while len(self._plans) <= k:
            j = len(self._plans)
            x = j if self.unit == "iterations" else self._steps_before[j]
            plan = self._plan_for(x, j)
            self._plans.append(plan)
            self._steps_before.append(self._steps_before[j] + plan.batch_size)
        return self._plans[k]

    def env_steps_before(self, k: int) -> int:
        self.plan_at(k)
        return self._steps_before[k]

    def reachable_plans(self, max_iterations: Optional[int], max_env_steps: Optional[int]) -> Iterator[Plan]:
        k = 0
        while max_iterations is None or k < max_iterations:
            if max_env_steps is not None and self.env_steps_before(k) >= max_env_steps:
                return
            yield self.plan_at(k)
            k += 1

    def most_envs(self, max_iterations: Optional[int], max_env_steps: Optional[int]) -> int:
        """The most envs at any breakpoint (between breakpoints values lie between theirs), whatever the
        budget: a run resumed with more iterations finds the pool its checkpoint has."""
        ats = {at for points in (self.num_envs, self.rollout_length, self.epochs) if points for at, _ in points}
        return max(self._plan_for(at, 0).num_envs for at in ats | {0})

    def _plan_for(self, x: int, k: int) -> Plan:
        base = self.base
        num_envs = self._value(self.num_envs, x)
        rollout = self._value(self.rollout_length, x)
        epochs = self._value(self.epochs, x)
        if self.batch_size is not None:
            if num_envs is not None:
                num_envs = _nearest_divisor(self.batch_size, num_envs)
                rollout = self.batch_size // num_envs
            else:
                rollout = _nearest_divisor(self.batch_size, rollout)
                num_envs = self.batch_size // rollout
        num_envs = base.num_envs if num_envs is None else int(round(num_envs))
        rollout = base.rollout_length if rollout is None else int(round(rollout))
        epochs = None if epochs is None else int(round(epochs))
        try:
            return base.resized(num_envs, rollout, epochs, self.minibatches)
        except UserError as error:
            raise UserError(f"{error} (iteration {k} of scheduler=schedule)") from None

    def _value(self, points: Optional[Breakpoints], x: int) -> Optional[float]:
        if points is None:
            return None
        ats = [at for at, _ in points]
        i = bisect.bisect_right(ats, x) - 1
        if i < 0:
            return points[0][1]
        if self.interpolation == "step" or i == len(points) - 1:
            return points[i][1]
        (x0, v0), (x1, v1) = points[i], points[i + 1]
        return v0 + (v1 - v0) * (x - x0) / (x1 - x0)


def _breakpoints(key: str, value: Any) -> Optional[Breakpoints]:
    """[[at, value], ...] with increasing `at` from 0 and positive values; a bare number is a constant."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [[0, value]]
    try:
        points = [(int(at), float(v)) for at, v in value]
    except (TypeError, ValueError):
        raise UserError(f"{key}={value!r} must be a list of [at, value] pairs, e.g. '[[0,1024],[200,4096]]'") from None
    if not points or points[0][0] != 0:
        raise UserError(f"{key}={value!r}: the first breakpoint must be at 0")
    if any(b[0] <= a[0] for a, b in zip(points, points[1:])):
        raise UserError(f"{key}={value!r}: breakpoints must be in increasing order of `at`")
    if any(v < 1 for _, v in points):
        raise UserError(f"{key}={value!r}: values must be at least 1")
    return points


def _nearest_divisor(batch: int, value: float) -> int:
    return min(_divisors(batch), key=lambda d: (abs(d - value), d))


@functools.lru_cache(maxsize=16)
def _divisors(n: int) -> Tuple[int, ...]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))
