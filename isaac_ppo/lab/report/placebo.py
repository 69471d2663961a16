"""A placebo of a run's collection schedule: the same changes of the split, in the same order, at random iterations.

Issue 21's audit credits a schedule that moves on a signal (scheduler=adaptive) only if it beats, on seeds chosen
before the run, both the best fixed split and this placebo: if the placebo does as well, the gain came from the
changes themselves, not from when the signal made them.

    isaac-ppo-study placebo STUDY arm=ARM seed=S [draw=N] [runs_dir=DIR]

prints the arm to add to a study: scheduler=schedule with scheduler.num_envs breakpoints at the drawn iterations,
the run's batch size kept (scheduler.batch_size: rollout_length = B / num_envs), its minibatches, its mode and
its env pool (num_envs, when its config set it).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from isaac_ppo.errors import UserError


def changes_of(rows: Sequence[Dict[str, Any]]) -> List[Tuple[int, int]]:
    """[(iteration, num_envs)]: the first row's split, then every iteration whose num_envs differs from the last."""
    changes: List[Tuple[int, int]] = []
    for row in rows:
        if not changes or row["num_envs"] != changes[-1][1]:
            changes.append((int(row["iteration"]), int(row["num_envs"])))
    return changes


def placebo_breakpoints(changes: Sequence[Tuple[int, int]], iterations: int, draw: int) -> List[List[int]]:
    """The same values in the same order from iteration 0, each change moved to an iteration drawn uniformly
    (without replacement, seed `draw`) from 1 .. iterations - 1."""
    moved = [value for _, value in changes[1:]]
    if len(moved) > iterations - 1:
        raise UserError(f"{len(moved)} changes do not fit in {iterations} iterations")
    times = np.random.default_rng(draw).choice(np.arange(1, iterations), size=len(moved), replace=False)
    return [[0, changes[0][1]]] + [[int(t), value] for t, value in zip(sorted(times), moved)]


def placebo_overrides(rows: Sequence[Dict[str, Any]], draw: int, pool: Optional[int] = None) -> List[str]:
    """The isaac-ppo-train overrides of the placebo of the run whose metrics rows these are; `pool`, the run's
    num_envs when its config set one (the env pool the splits are drawn from), is kept too."""
    if not rows:
        raise UserError("the run has no rows yet: a placebo copies a run's changes, so it needs the run first")
    batch = {int(row["batch_size"]) for row in rows}
    if len(batch) != 1:
        raise UserError(f"the run's batch size changed ({sorted(batch)}): its placebo keeps one B "
                        "(scheduler=adaptive with keep_batch_size=true)")
    (b,) = batch
    points = placebo_breakpoints(changes_of(rows), len(rows), draw)
    text = ",".join(f"[{at},{value}]" for at, value in points)
    words = ["scheduler=schedule", f"scheduler.mode={rows[0]['mode']}", f"scheduler.batch_size={b}",
             f"scheduler.minibatches={b // int(rows[0]['minibatch_size'])}", f"scheduler.num_envs=[{text}]"]
    return words + ([f"num_envs={pool}"] if pool is not None else [])
