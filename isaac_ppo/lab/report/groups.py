"""Grouping runs: gather the runs below some folders, group them by swept overrides, summarise each group.

Seeds are pooled within a group; its summary is the IQM and 95% stratified bootstrap CI of the final metric of
its complete runs. gather returns all of it as a Report.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from isaac_ppo.errors import UserError
from isaac_ppo.lab.archive import is_pack, unpacked
from isaac_ppo.lab.report.runs import (Run, _get, check_metric, default_metric, find_run_dirs, join_resumed, load_run,
                                   run_final)
from isaac_ppo.lab.watch import RETURN_MEAN
from isaac_ppo.stats import iqm, stratified_bootstrap_ci


# A goal of time to solve: (measure, threshold), the measure an evaluation's key: RETURN_MEAN for solve_times'
# thresholds, a task's solve_measures name for measure_solve_times' (FrankaCabinet's ("drawer_opened", 0.9)), as
# isaac-ppo-tune names them
Goal = Tuple[str, float]


def goal_order(goals: Iterable[Goal]) -> List[Goal]:
    """The returns' goals first, then each measure's, each by threshold."""
    return sorted(goals, key=lambda goal: (goal[0] != RETURN_MEAN, goal))

# ------------------------------------------------------------------------------------------ grouping


@dataclass
class Group:
    values: Dict[str, str]  # swept key -> value
    runs: List[Run]
    finals: List[float] = field(default_factory=list)  # the final metric of the runs in the statistics
    used: List[Run] = field(default_factory=list)
    iqm: float = math.nan
    ci: Tuple[float, float] = (math.nan, math.nan)
    env_steps: float = math.nan  # median final env steps of the runs in the statistics
    wall_s: float = math.nan  # mean wall time of the runs in the statistics
    # time to solve, per goal: (runs that reached it, runs in the statistics, IQM seconds, its 95% CI)
    solve: Dict[Goal, Tuple[int, int, float, Tuple[float, float]]] = field(default_factory=dict)
    name: str = ""  # a caller's name for the group (a study's arm), shown instead of its overrides

    @property
    def label(self) -> str:
        return self.name or ", ".join(f"{k}={v}" for k, v in self.values.items()) or "all"


def name_groups(groups: Sequence[Group], names: Dict[str, str]) -> None:
    """Name each group whose runs all carry one name in `names` (run folder -> name, e.g. a study's arms)."""
    by_path = {os.path.realpath(path): name for path, name in names.items()}
    for group in groups:
        found = {by_path.get(os.path.realpath(run.path)) for run in group.runs}
        if len(found) == 1 and None not in found:
            group.name = found.pop()


def fill_unset_keys(runs: Sequence[Run]) -> None:
    """A key some runs override and others leave at its default (an isaac-ppo run beside one with
    agent.backend=rl_games) takes, in the others, the value they ran with: their group choice or their resolved
    config. Keys that cannot be found so stay missing (check_same_keys refuses them)."""
    import yaml

    keys = {key for run in runs for key in run.overrides}
    for run in runs:
        # in name order: a set's order changes with the process's hash seed, and the first run's key order is the
        # report's column and group order (the same runs must give the same report)
        for key in sorted(keys - set(run.overrides)):
            value = run.choices.get(key) if key in run.choices else _get(run.config, key)
            if value is not None and not isinstance(value, (dict, list)):
                run.overrides[key] = value if isinstance(value, str) else yaml.safe_dump(value).split("\n")[0]


def check_same_keys(runs: Sequence[Run]) -> None:
    """All runs must be the same experiment up to override values; the seed alone may be left out."""
    reference = runs[0]
    base = set(reference.overrides) - {"seed"}
    for run in runs[1:]:
        keys = set(run.overrides) - {"seed"}
        if keys == base:
            continue
        extra = sorted(keys - base)
        if extra:
            having, lacking, key = run, reference, extra[0]
        else:
            having, lacking, key = reference, run, sorted(base - keys)[0]
        raise UserError(
            f"runs with mismatched keys: {having.path} has `{key}`, {lacking.path} does not: report them separately"
        )


def split_keys(runs: Sequence[Run]) -> Tuple[List[str], Dict[str, str]]:
    """(swept keys in override order, common settings): a key is swept when its value differs across runs.
    The seed is never a group key: its runs are pooled."""
    keys = [k for k in runs[0].overrides if k != "seed"]
    swept = [k for k in keys if len({run.overrides.get(k) for run in runs}) > 1]
    common = {k: runs[0].overrides[k] for k in keys if k not in swept}
    return swept, common


def group_runs(runs: Sequence[Run], swept: Sequence[str]) -> List[Group]:
    by_values: Dict[Tuple[str, ...], List[Run]] = {}
    for run in runs:
        by_values.setdefault(tuple(run.overrides.get(k, "") for k in swept), []).append(run)
    ordered = sorted(by_values, key=lambda values: tuple(_value_key(v) for v in values))
    return [Group(dict(zip(swept, values)), by_values[values]) for values in ordered]


def summarise_group(group: Group, metric: str, reps: int, seed: int) -> None:
    """Fill in the group's statistics from its complete runs that logged the metric."""
    for run in group.runs:
        value = run_final(run, metric) if run.complete else None
        if value is not None:
            group.used.append(run)
            group.finals.append(value)
    if not group.used:
        return
    group.iqm = iqm(group.finals)
    group.ci = stratified_bootstrap_ci(group.finals, [r.task for r in group.used], reps, seed)
    steps = [r.env_steps for r in group.used if r.env_steps is not None]
    walls = [r.wall_s for r in group.used if r.wall_s is not None]
    group.env_steps = float(np.median(steps)) if steps else math.nan
    group.wall_s = float(np.mean(walls)) if walls else math.nan
    summarise_solve_times(group, reps, seed)


def summarise_solve_times(group: Group, reps: int, seed: int) -> None:
    """Per threshold of the runs' solve_times and measure_solve_times (metrics.json): how many reached it, and the
    IQM of their seconds to it with its 95% CI (over the runs that reached it: a run that never did has no time to
    average)."""
    reached: Dict[Goal, List[Tuple[float, str]]] = {}
    for run in group.used:
        summary = run.summary or {}
        for entry in (summary.get("solve_times") or []) + (summary.get("measure_solve_times") or []):
            times = reached.setdefault((entry.get("measure", RETURN_MEAN), float(entry["threshold"])), [])
            if entry.get("seconds") is not None:
                times.append((float(entry["seconds"]), run.task))
    for goal, times in reached.items():
        if times:
            values, tasks = [t for t, _ in times], [task for _, task in times]
            stats = (iqm(values), stratified_bootstrap_ci(values, tasks, reps, seed))
        else:
            stats = (math.nan, (math.nan, math.nan))
        group.solve[goal] = (len(times), len(group.used)) + stats


def _value_key(value: str) -> Tuple[int, float, str]:
    """Numbers first and numerically, then everything else alphabetically."""
    number = _as_float(value)
    return (0, number, value) if number is not None else (1, 0.0, value)


def _as_float(value: str) -> Optional[float]:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


# ------------------------------------------------------------------------------------------ the report


@dataclass
class Report:
    metric: str
    runs: List[Run]
    swept: List[str]
    common: Dict[str, str]
    groups: List[Group]
    reps: int
    seed: int

    @property
    def left_out(self) -> List[Tuple[Run, str]]:
        """The runs outside the statistics, each with why."""
        used = {id(run) for group in self.groups for run in group.used}
        out = []
        for run in self.runs:
            if id(run) in used:
                continue
            why = run.detail if not run.complete else f"complete, but never logged {self.metric}"
            out.append((run, why))
        return out


def gather(dirs: Sequence[str], metric: Optional[str] = None, reps: int = 2000, seed: int = 0,
           skip: Iterable[str] = ()) -> Report:
    """Find, load, check and group the runs below dirs and compute each group's statistics."""
    skip = list(skip)
    paths: List[str] = []
    seen = set()
    for root in dirs:
        if is_pack(root) and os.path.isfile(root):
            root = unpacked(root)  # a study's packed archive, read as its folder (isaac_ppo.lab.archive)
        if not os.path.isdir(root):
            raise UserError(f"{root}: no such directory")
        found = find_run_dirs(root, skip)
        if not found:
            raise UserError(
                f"{root}: no runs found (no .hydra/overrides.yaml below it): pass a run or multirun folder of "
                "isaac-ppo-train"
            )
        for path in found:
            if os.path.realpath(path) not in seen:  # overlapping DIRs list a run once
                seen.add(os.path.realpath(path))
                paths.append(path)
    runs = join_resumed([load_run(path) for path in paths])  # a run resumed into new folders is one run
    metric = metric or default_metric(runs)
    fill_unset_keys(runs)
    check_same_keys(runs)
    check_metric(runs, metric)
    complete = [run for run in runs if run.complete]
    if not complete:
        counts: Dict[str, int] = {}
        for run in runs:
            counts[run.status] = counts.get(run.status, 0) + 1
        statuses = ", ".join(f"{n} {status}" for status, n in counts.items())
        raise UserError(f"no complete run among the {len(runs)} runs ({statuses}): nothing to summarise yet")
    swept, common = split_keys(runs)
    groups = group_runs(runs, swept)
    for group in groups:
        summarise_group(group, metric, reps, seed)
    return Report(metric, runs, swept, common, groups, reps, seed)
