"""Does the adaptive scheduler's signal predict return? Its rule, replayed on runs that did not use it.

scheduler=adaptive moves to more envs when its signal says the network is under stress (feature rank fallen below
its reference, dormancy risen above it, ESS low, KL high; isaac_ppo.scheduler.adaptive). Its premise is that a
run under stress learns worse. To test the premise on a study's fixed-split runs, the rule itself (the class, with
its defaults unless told otherwise) is fed each run's logged rows as the runner feeds it (the update's KL every
iteration, the diagnostics where they were measured), at one rung, so that it never moves and its references stay
where its warmup put them, and asked after every iteration whether it is under stress: whether it would have moved.

A run's stress share is the fraction of its iterations up to a cut (in env steps) at which it was. The study
report's `predict` ranks runs by it under the name `adaptive_stress`, beside each diagnostic: a premise that holds
shows as a negative Spearman correlation with the final return.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

from isaac_ppo.scheduler.adaptive import AdaptiveScheduler
from isaac_ppo.scheduler.plan import Plan

ADAPTIVE_STRESS = "adaptive_stress"  # the name predict knows it by


def stress_share(rows: Sequence[Mapping[str, Any]], cut_env_steps: float,
                 rule: Optional[Dict[str, Any]] = None) -> Optional[float]:
    """The share of the run's iterations (rows with env_steps <= cut) at which the adaptive rule (`rule`: keys of
    cfg/scheduler/adaptive.yaml, default its defaults) was under stress; None when no row is that early."""
    rows = [row for row in rows if "num_envs" in row and row.get("env_steps", 0) <= cut_env_steps]
    if not rows:
        return None
    first = rows[0]
    batch = int(first["num_envs"]) * int(first["rollout_length"])
    plan = Plan(int(first["num_envs"]), int(first["rollout_length"]), int(first.get("epochs", 1)),
                int(first.get("minibatch_size") or batch))
    replay = AdaptiveScheduler(plan, **{**(rule or {}), "min_num_envs": plan.num_envs,
                                        "max_num_envs": plan.num_envs, "min_dwell": 0})
    stressed = 0
    for row in rows:
        diag = row.get("diagnostics")
        replay.observe(int(row["iteration"]), row, diag if isinstance(diag, dict) else {})
        stressed += bool(replay.stress())
    return stressed / len(rows)
