"""The fixed, budget and schedule schedulers, the registry, pool sizing and the refusal of impossible plans."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from isaac_ppo.errors import UserError
from isaac_ppo.scheduler import FixedScheduler, Plan, Scheduler, build_scheduler, check_plans, pool_size
from isaac_ppo.scheduler.budget import BudgetScheduler
from isaac_ppo.scheduler.schedule import ScheduleScheduler

ANT = Plan(4096, 16, 4, 32768)  # Ant's default: B = 65536 in 2 minibatches


# ------------------------------------------------------------------------------------------ Plan.resized


def test_resized_keeps_the_minibatch_count_unless_told():
    plan = ANT.resized(1024, 64)
    assert (plan.batch_size, plan.num_minibatches, plan.minibatch_size, plan.epochs) == (65536, 2, 32768, 4)
    grown = ANT.resized(8192, 16, epochs=8)
    assert (grown.batch_size, grown.minibatch_size, grown.epochs) == (131072, 65536, 8)
    assert ANT.resized(1024, 16, minibatches=4).minibatch_size == 4096


def test_resized_keeps_the_size_when_the_base_plan_has_no_whole_count():
    base = Plan(64, 16, 4, 8192)  # a minibatch larger than its batch: the base plan itself never runs
    assert base.resized(128, 64).minibatch_size == 8192
    with pytest.raises(UserError, match="minibatch_size=8192"):
        base.resized(128, 32).check(4096)


def test_resized_refuses_a_count_that_does_not_divide():
    with pytest.raises(UserError, match=r"3 minibatches .* do not divide the batch num_envs x rollout_length = 1024 x 16"):
        ANT.resized(1024, 16, minibatches=3)


# ------------------------------------------------------------------------------------------ fixed and budget


def test_fixed_is_the_base_plan_every_iteration():
    scheduler = FixedScheduler(ANT)
    assert all(scheduler.plan(k, []) == ANT for k in range(5))
    assert list(scheduler.reachable_plans(500, None)) == [ANT]
    assert FixedScheduler(ANT, mode="concurrent").plan(0, []).mode == "concurrent"


@pytest.mark.parametrize("kwargs,split", [
    ({"batch_size": 65536, "num_envs": 1024}, (1024, 64)),
    ({"batch_size": 65536, "rollout_length": 32}, (2048, 32)),
    ({"batch_size": 32768}, (4096, 8)),  # num_envs from the base plan
    ({"num_envs": 256}, (256, 256)),  # B from the base plan
    ({"batch_size": 65536, "num_envs": 2048, "rollout_length": 32}, (2048, 32)),
])
def test_budget_splits_a_fixed_batch(kwargs, split):
    plan = BudgetScheduler(ANT, **kwargs).plan(0, [])
    assert (plan.num_envs, plan.rollout_length) == split
    assert plan.batch_size == kwargs.get("batch_size", 65536)
    assert plan.num_minibatches == 2 and plan.epochs == 4


@pytest.mark.parametrize("kwargs,message", [
    ({"batch_size": 65536, "num_envs": 1000}, r"scheduler.num_envs=1000 does not divide scheduler.batch_size=65536"),
    ({"batch_size": 65536, "rollout_length": 48}, r"scheduler.rollout_length=48 does not divide"),
    ({"batch_size": 65536, "num_envs": 1024, "rollout_length": 32}, r"is not scheduler.batch_size=65536"),
    ({"batch_size": 65536, "epochs": 0}, r"scheduler.epochs=0 must be a positive integer"),
    ({"batch_size": -4}, r"scheduler.batch_size=-4 must be a positive integer"),
    ({"batch_size": 65536, "num_envs": 1024, "minibatches": 3}, r"3 minibatches"),
])
def test_budget_refusals_name_the_keys(kwargs, message):
    with pytest.raises(UserError, match=message):
        BudgetScheduler(ANT, **kwargs)


def test_budget_split_needing_more_envs_than_the_pool_is_refused():
    scheduler = BudgetScheduler(ANT, batch_size=65536, num_envs=8192)
    with pytest.raises(UserError, match=r"num_envs=8192 must be within 1\.\.4096, the env pool"):
        check_plans(scheduler, 4096, 500, None)


# ------------------------------------------------------------------------------------------ schedule


def test_step_schedule_endpoints_and_midpoints_at_fixed_batch():
    scheduler = ScheduleScheduler(ANT, num_envs=[[0, 1024], [100, 2048], [200, 4096]], batch_size=65536)
    splits = {k: (scheduler.plan_at(k).num_envs, scheduler.plan_at(k).rollout_length) for k in (0, 50, 99, 100, 150, 200, 499)}
    assert splits == {0: (1024, 64), 50: (1024, 64), 99: (1024, 64), 100: (2048, 32), 150: (2048, 32),
                      200: (4096, 16), 499: (4096, 16)}
    assert all(scheduler.plan_at(k).batch_size == 65536 for k in range(300))


def test_linear_schedule_interpolates_and_rounds_to_divisors_of_the_batch():
    scheduler = ScheduleScheduler(ANT, interpolation="linear", num_envs=[[0, 1024], [100, 4096]], batch_size=65536)
    assert scheduler.plan_at(0).num_envs == 1024 and scheduler.plan_at(100).num_envs == 4096
    # midpoint 2560 lies between the divisors 2048 and 4096: the nearer one is taken
    assert scheduler.plan_at(50).num_envs == 2048
    assert scheduler.plan_at(90).num_envs == 4096  # 3788.8 -> 4096
    assert scheduler.plan_at(10).num_envs == 1024  # 1331.2 -> 1024
    counts = [scheduler.plan_at(k).num_envs for k in range(150)]
    assert counts == sorted(counts)  # a rising schedule never steps back


def test_linear_schedule_without_fixed_batch_lets_the_batch_follow():
    scheduler = ScheduleScheduler(ANT, interpolation="linear", rollout_length=[[0, 32], [10, 16]],
                                  epochs=[[0, 8], [10, 4]])
    mid = scheduler.plan_at(5)
    assert (mid.num_envs, mid.rollout_length, mid.epochs) == (4096, 24, 6)
    assert mid.num_minibatches == 2 and mid.batch_size == 4096 * 24
    assert scheduler.plan_at(20).rollout_length == 16


def test_schedule_in_env_steps_counts_the_batches_before():
    # 1024 x 64 = 65536 steps per iteration until 200,000 env steps, then 4096 x 16
    scheduler = ScheduleScheduler(ANT, unit="env_steps", num_envs=[[0, 1024], [200000, 4096]], batch_size=65536)
    assert [scheduler.plan_at(k).num_envs for k in range(6)] == [1024, 1024, 1024, 1024, 4096, 4096]
    assert scheduler.env_steps_before(4) == 4 * 65536


def test_schedule_plans_are_a_pure_function_of_the_iteration():
    make = lambda: ScheduleScheduler(ANT, unit="env_steps", interpolation="linear",
                                     rollout_length=[[0, 64], [1000000, 16]], epochs=[[0, 2], [500000, 6]])
    first, second = make(), make()
    forward = [first.plan_at(k) for k in range(40)]
    assert [second.plan_at(k) for k in reversed(range(40))][::-1] == forward  # a resumed run asks from the middle


def test_schedule_logs_each_change_once():
    scheduler = ScheduleScheduler(ANT, num_envs=[[0, 1024], [3, 4096]], batch_size=65536)
    for k in range(6):
        scheduler.plan(k, [])
    events = scheduler.take_events()
    assert len(events) == 2
    assert events[0].startswith("iteration 0: schedule starts with num_envs 1024 x rollout_length 64")
    assert events[1].startswith("iteration 3: schedule changes to num_envs 4096 x rollout_length 16")
    assert scheduler.take_events() == []


def test_schedule_reachable_plans_stop_at_the_budgets():
    scheduler = ScheduleScheduler(ANT, num_envs=[[0, 1024], [3, 4096]], batch_size=65536)
    assert len(list(scheduler.reachable_plans(10, None))) == 10
    assert len(list(scheduler.reachable_plans(None, 5 * 65536))) == 5
    assert max(p.num_envs for p in scheduler.reachable_plans(3, None)) == 1024


@pytest.mark.parametrize("kwargs,message", [
    ({"num_envs": [[5, 1024]]}, r"scheduler.num_envs=.*first breakpoint must be at 0"),
    ({"num_envs": [[0, 1024], [0, 2048]]}, r"increasing order"),
    ({"rollout_length": [[0, 0]]}, r"values must be at least 1"),
    ({"epochs": "many"}, r"scheduler.epochs='many' must be a list of \[at, value\] pairs"),
    ({"unit": "seconds"}, r"scheduler.unit='seconds' is not one of: iterations, env_steps"),
    ({"interpolation": "cubic"}, r"scheduler.interpolation='cubic'"),
    ({"batch_size": 65536}, r"schedule exactly one of scheduler.num_envs and scheduler.rollout_length"),
    ({"batch_size": 65536, "num_envs": [[0, 1024]], "rollout_length": [[0, 64]]}, r"schedule exactly one"),
])
def test_schedule_refusals_name_the_keys(kwargs, message):
    with pytest.raises(UserError, match=message):
        ScheduleScheduler(ANT, **kwargs)


def test_schedule_whose_minibatches_do_not_divide_a_later_batch_is_refused_at_start():
    scheduler = ScheduleScheduler(ANT, num_envs=[[0, 4096], [50, 999]], rollout_length=[[0, 16], [50, 9]])
    with pytest.raises(UserError, match=r"2 minibatches .* 999 x 9 = 8991 \(iteration 50 of scheduler=schedule\)"):
        check_plans(scheduler, 4096, 100, None)
    check_plans(scheduler, 4096, 50, None)  # a run that ends before the change never meets it


# ------------------------------------------------------------------------------------------ registry and pool


def _cfg(scheduler, num_envs=None, **top):
    cfg = {"num_envs": num_envs, "task": {"env": {"numEnvs": 4096}},
           "agent": {"horizon": 16, "mini_epochs": 4, "minibatch_size": 32768}, "scheduler": scheduler}
    cfg.update(top)
    return OmegaConf.create(cfg)


def test_build_scheduler_from_target_and_arguments():
    scheduler = build_scheduler(_cfg({"_target_": "isaac_ppo.scheduler.budget.BudgetScheduler", "mode": "concurrent",
                                      "batch_size": 65536, "num_envs": 2048, "rollout_length": None}))
    assert isinstance(scheduler, BudgetScheduler)
    assert scheduler.plan(0, []) == Plan(2048, 32, 4, 32768, "concurrent")


class AlternatingScheduler(Scheduler):
    """A user's own: alternates two splits of the base batch."""

    def __init__(self, base, mode="sync", other_num_envs=1024):
        super().__init__(base, mode)
        self.other = base.resized(other_num_envs, base.batch_size // other_num_envs)

    def plan(self, k, history):
        return self.other if k % 2 else self.base

    def reachable_plans(self, max_iterations, max_env_steps):
        yield from (self.base, self.other)


def test_a_users_own_scheduler_through_target():
    scheduler = build_scheduler(_cfg({"_target_": f"{__name__}.AlternatingScheduler", "other_num_envs": 2048}))
    assert [scheduler.plan(k, []).num_envs for k in range(4)] == [4096, 2048, 4096, 2048]


@pytest.mark.parametrize("node,message", [
    ({"_target_": "no_such_module.Sched"}, r"scheduler._target_=no_such_module.Sched: cannot import it"),
    ({"_target_": ".Sched"}, r"scheduler._target_=.Sched: cannot import it"),  # (a relative module name: the fuzzer)
    ({"_target_": "isaac_ppo.scheduler.plan.Plan"}, r"is not a subclass of isaac_ppo.scheduler.Scheduler"),
    ({"_target_": None}, r"scheduler._target_=None must name a class"),
    ({"_target_": "isaac_ppo.scheduler.fixed.FixedScheduler", "speed": 3}, r"unexpected keyword argument 'speed'"),
])
def test_build_scheduler_refusals(node, message):
    with pytest.raises(UserError, match=message):
        build_scheduler(_cfg(node))


def test_pool_is_num_envs_when_given_else_the_most_any_plan_asks_for():
    scheduler = ScheduleScheduler(ANT.resized(1024, 64), num_envs=[[0, 1024], [100, 8192]], batch_size=65536)
    assert pool_size(_cfg({}), scheduler, 500, None) == 8192
    # also when the change comes after this run's end: a resumed, longer run must find the same pool
    assert pool_size(_cfg({}), scheduler, 100, None) == 8192
    assert pool_size(_cfg({}, num_envs=2048), scheduler, 500, None) == 2048
    with pytest.raises(UserError, match=r"num_envs=8192 must be within 1\.\.2048"):
        check_plans(scheduler, 2048, 500, None)
