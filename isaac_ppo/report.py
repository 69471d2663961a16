"""isaac-ppo-report: the table and figures of a set of isaac-ppo-train runs (single runs or Hydra multiruns).

This module owns gathering run folders, their status (complete, stopped, crashed or running, empty), grouping
them by the swept overrides with seeds pooled, and the honest summary of each group: the interquartile mean
(IQM) of the runs' final metric with a 95% stratified bootstrap confidence interval (Agarwal et al. 2021, the
rliable recipe), written as a console table, report.md, report.csv, runs.csv and PNG figures.

The statistics are plain numpy so the package needs neither scipy nor rliable.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from isaac_ppo.errors import UserError

PROG = "isaac-ppo-report"
COMPLETE, STOPPED, CRASHED, EMPTY = "complete", "stopped", "crashed or running", "empty"
MAX_CURVE_POINTS = 200
# folders inside a run that never hold runs: pruned to keep the walk over big sweeps quick
NOT_RUNS = {".hydra", "tb", "checkpoints", "__pycache__"}
# overrides that say where a run writes, not how it trains: never a group key, so runs named per seed
# (experiment=ant_s0, ant_s1) or gathered from several runs_dirs pool like any seeds of one setting
OUTPUT_KEYS = {"experiment", "runs_dir", "hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir"}
# bounds the (reps, runs, points) resample array the bootstrap holds at once
BOOTSTRAP_CHUNK_ELEMENTS = 4_000_000


# ------------------------------------------------------------------------------------------ statistics


def iqm(values: Any, axis: int = 0) -> Any:
    """Interquartile mean along `axis`, as scipy.stats.trim_mean(values, 0.25, axis) computes it: int(n / 4)
    values cut from each end of the sorted values, the mean of the rest. A float for 1-D input."""
    x = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = x.shape[axis]
    if n == 0:
        raise ValueError("iqm of no values")
    cut = int(0.25 * n)
    kept = np.take(x, np.arange(cut, n - cut), axis=axis)
    result = kept.mean(axis=axis)
    return float(result) if np.ndim(result) == 0 else result


def stratified_resample_indices(strata: Sequence[Any], reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, n) run indices: each row draws, within every stratum, as many runs as it holds, with
    replacement, so each resample keeps the strata's sizes (no task is over- or under-represented)."""
    labels = np.asarray([str(s) for s in strata])
    columns = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        columns.append(members[rng.integers(0, len(members), size=(reps, len(members)))])
    return np.concatenate(columns, axis=1)


def stratified_bootstrap_ci(values: Any, strata: Sequence[Any], reps: int = 2000, seed: int = 0,
                            level: float = 0.95) -> Tuple[Any, Any]:
    """Percentile bootstrap CI of the IQM over runs (axis 0), resampling runs within each stratum.

    values: shape (runs,) or (runs, points); the CI is pointwise for the latter (vectorised over points).
    Returns (low, high): floats for (runs,), arrays of shape (points,) otherwise. Deterministic for a seed.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.shape[0] == 0:
        raise ValueError("bootstrap of no runs")
    if len(strata) != x.shape[0]:
        raise ValueError(f"{len(strata)} strata for {x.shape[0]} runs")
    if reps < 1:
        raise ValueError("reps must be at least 1")
    indices = stratified_resample_indices(strata, reps, np.random.default_rng(seed))
    per_rep = int(np.prod(x.shape))
    chunk = max(1, BOOTSTRAP_CHUNK_ELEMENTS // max(per_rep, 1))
    stats = np.concatenate([iqm(x[indices[i:i + chunk]], axis=1) for i in range(0, reps, chunk)], axis=0)
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(stats, [tail, 100.0 - tail], axis=0)
    if np.ndim(low) == 0:
        return float(low), float(high)
    return low, high


# ------------------------------------------------------------------------------------------ runs on disk


@dataclass
class Run:
    path: str
    overrides: Dict[str, str]
    task: str
    seed: Optional[str]
    rows: List[Dict[str, Any]]
    summary: Optional[Dict[str, Any]]
    status: str
    detail: str  # the status in words, for the list of runs left out of the statistics
    config: Dict[str, Any] = field(default_factory=dict)  # the resolved config the run wrote
    choices: Dict[str, Any] = field(default_factory=dict)  # its config group choices (Hydra's runtime.choices)

    @property
    def complete(self) -> bool:
        return self.status == COMPLETE

    @property
    def env_steps(self) -> Optional[float]:
        return _last_number([self.summary] if self.summary else self.rows[-1:], "env_steps")

    @property
    def wall_s(self) -> Optional[float]:
        return _last_number([self.summary] if self.summary else self.rows[-1:], "wall_s")


def find_run_dirs(root: str, skip: Iterable[str] = ()) -> List[str]:
    """Every folder at or below root that holds .hydra/overrides.yaml, in natural order; report folders (and
    the paths in skip) are not searched."""
    skipped = {os.path.realpath(p) for p in skip}
    found = []
    for folder, subfolders, files in os.walk(root):
        if os.path.isfile(os.path.join(folder, ".hydra", "overrides.yaml")):
            found.append(os.path.normpath(folder))
        subfolders[:] = [
            s for s in subfolders
            if s not in NOT_RUNS and os.path.realpath(os.path.join(folder, s)) not in skipped
            and not _is_report_dir(os.path.join(folder, s))
        ]
    return sorted(found, key=_natural_key)


def _is_report_dir(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "report.md")) and os.path.isfile(os.path.join(folder, "runs.csv"))


def parse_overrides(items: Sequence[Any]) -> Dict[str, str]:
    """Hydra override strings to key -> value; the +/++/~ prefixes are dropped from the key (a deletion,
    `~key`, has the value '~')."""
    parsed: Dict[str, str] = {}
    for item in items:
        text = str(item)
        key, sep, value = text.partition("=")
        deletion = key.startswith("~")
        key = key.lstrip("+~").strip()
        parsed[key] = value.strip() if sep else ("~" if deletion else "")
    return parsed


def load_run(path: str) -> Run:
    import yaml

    with open(os.path.join(path, ".hydra", "overrides.yaml")) as f:
        overrides = {k: v for k, v in parse_overrides(yaml.safe_load(f) or []).items() if k not in OUTPUT_KEYS}
    config = _read_yaml(os.path.join(path, "config.yaml"))
    task = str(_get(config, "task.name") or overrides.get("task", ""))
    seed = _get(config, "seed")
    seed = overrides.get("seed") if seed is None else str(seed)
    rows = _read_jsonl(os.path.join(path, "metrics.jsonl"))
    summary = _read_json(os.path.join(path, "metrics.json"))
    status, detail = run_status(rows, summary)
    choices = _get(_read_yaml(os.path.join(path, ".hydra", "hydra.yaml")), "hydra.runtime.choices") or {}
    return Run(path, overrides, task, seed, rows, summary, status, detail, config, choices)


def run_status(rows: Sequence[Dict[str, Any]], summary: Optional[Dict[str, Any]]) -> Tuple[str, str]:
    """(status, status in words) of a run from its metrics.jsonl rows and metrics.json."""
    if not rows:
        return EMPTY, "empty (no rows in metrics.jsonl)"
    if summary is None:
        # no summary yet: the process is still going, or died without its SIGTERM/SIGINT handler
        return CRASHED, f"crashed or running (no metrics.json; {len(rows)} iterations logged)"
    stopped_by = summary.get("stopped_by")
    if stopped_by:
        iterations = summary.get("iterations", len(rows))
        steps = summary.get("env_steps")
        at = f" ({_fmt_steps(steps)} env steps)" if isinstance(steps, (int, float)) else ""
        return STOPPED, f"stopped by {stopped_by} at iteration {iterations}{at}"
    return COMPLETE, COMPLETE


def _read_yaml(path: str) -> Dict[str, Any]:
    import yaml

    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        loaded = yaml.safe_load(f)
    return loaded if isinstance(loaded, dict) else {}


def _read_json(path: str) -> Optional[Dict[str, Any]]:
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            loaded = json.load(f)
    except ValueError:
        return None  # cut short mid-write: as good as absent
    return loaded if isinstance(loaded, dict) else None


def _read_jsonl(path: str) -> List[Dict[str, Any]]:
    if not os.path.isfile(path):
        return []
    rows = []
    with open(path) as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                continue  # the last line of a killed run may be half written
            if isinstance(row, dict):
                rows.append(row)
    return rows


def _get(tree: Dict[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


# ------------------------------------------------------------------------------------------ metrics


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def metric_value(row: Dict[str, Any], metric: str) -> Optional[float]:
    """The metric in one metrics.jsonl row (`diagnostics.NAME` reaches into the nested dict), or None."""
    if metric.startswith("diagnostics."):
        nested = row.get("diagnostics")
        return _number(nested.get(metric[len("diagnostics."):])) if isinstance(nested, dict) else None
    return _number(row.get(metric))


def _last_number(rows: Sequence[Optional[Dict[str, Any]]], key: str) -> Optional[float]:
    for row in reversed(rows):
        value = _number(row.get(key)) if row else None
        if value is not None:
            return value
    return None


def final_value(rows: Sequence[Dict[str, Any]], metric: str) -> Optional[float]:
    """The last non-null value of the metric in a run's rows."""
    for row in reversed(rows):
        value = metric_value(row, metric)
        if value is not None:
            return value
    return None


def metric_series(rows: Sequence[Dict[str, Any]], metric: str) -> Tuple[np.ndarray, np.ndarray]:
    """(env_steps, values) of the rows that logged the metric, env steps increasing."""
    points: List[Tuple[float, float]] = []
    for row in rows:
        x, y = _number(row.get("env_steps")), metric_value(row, metric)
        if x is None or y is None:
            continue
        # a resumed run appends from its checkpoint: the rows logged after it supersede the older ones
        while points and points[-1][0] >= x:
            points.pop()
        points.append((x, y))
    return np.array([p[0] for p in points]), np.array([p[1] for p in points])


def available_metrics(runs: Sequence[Run]) -> List[str]:
    """The numeric top-level keys of the runs' rows, then diagnostics.NAME, in order of first appearance."""
    top: Dict[str, None] = {}
    nested: Dict[str, None] = {}
    for run in runs:
        for row in run.rows:
            for key, value in row.items():
                if key == "diagnostics" and isinstance(value, dict):
                    for name, inner in value.items():
                        if inner is None or _number(inner) is not None:
                            nested.setdefault("diagnostics." + name, None)
                elif value is None or _number(value) is not None:
                    top.setdefault(key, None)
    return list(top) + list(nested)


def check_metric(runs: Sequence[Run], metric: str) -> None:
    if any(metric_value(row, metric) is not None for run in runs for row in run.rows):
        return
    logged = [key for key in available_metrics(runs) if key != metric]
    # a sample of both kinds, so the diagnostics.NAME form shows up even behind dozens of top-level keys
    top = [key for key in logged if not key.startswith("diagnostics.")]
    nested = [key for key in logged if key.startswith("diagnostics.")]
    picked = top[:10] + nested[:3]
    more = len(logged) - len(picked)
    shown = ", ".join(picked) + (f", ... ({more} more)" if more else "")
    raise UserError(f"--metric {metric} is not logged in any run's metrics.jsonl: choose one of {shown or '(none)'}")


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

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values.items()) or "all"


def fill_unset_keys(runs: Sequence[Run]) -> None:
    """A key some runs override and others leave at its default (an isaac-ppo run beside one with
    agent.backend=rl_games) takes, in the others, the value they ran with: their group choice or their resolved
    config. Keys that cannot be found so stay missing (check_same_keys refuses them)."""
    import yaml

    keys = {key for run in runs for key in run.overrides}
    for run in runs:
        for key in keys - set(run.overrides):
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
        value = final_value(run.rows, metric) if run.complete else None
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


def _natural_key(path: str) -> List[Any]:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", path)]


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


def gather(dirs: Sequence[str], metric: str = "mean_return", reps: int = 2000, seed: int = 0,
           skip: Iterable[str] = ()) -> Report:
    """Find, load, check and group the runs below dirs and compute each group's statistics."""
    skip = list(skip)
    paths: List[str] = []
    seen = set()
    for root in dirs:
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
    runs = [load_run(path) for path in paths]
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


def table_rows(report: Report) -> Tuple[List[str], List[List[str]]]:
    """The summary table as (headers, formatted cells), shared by the console and report.md."""
    keys = report.swept or ["group"]
    headers = keys + ["runs", f"IQM {report.metric}", "95% CI", "env steps", "wall"]
    rows = []
    for group in report.groups:
        cells = [group.values[k] for k in report.swept] if report.swept else ["all"]
        complete = sum(run.complete for run in group.runs)
        cells.append(f"{complete}/{len(group.runs)}")
        if group.used:
            low, high = group.ci
            ci = f"[{_fmt_value(low)}, {_fmt_value(high)}]" + (" n=1" if len(group.used) == 1 else "")
            cells += [_fmt_value(group.iqm), ci, _fmt_steps(group.env_steps), _fmt_duration(group.wall_s)]
        else:
            cells += ["-", "-", "-", "-"]
        rows.append(cells)
    return headers, rows


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int) -> str:
    """Plain aligned columns: the first `left` (the key values) left-aligned, the numbers right-aligned."""
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) if i < left else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int) -> str:
    align = [":---" if i < left else "---:" for i in range(len(headers))]
    lines = [headers, align] + [list(r) for r in rows]
    return "\n".join("| " + " | ".join(str(c).replace("|", "\\|") for c in line) + " |" for line in lines)


def describe(report: Report) -> str:
    return (f"metric: {report.metric} (each run's last logged value); IQM over complete runs with a 95% "
            f"stratified bootstrap CI ({report.reps} resamples, seed {report.seed}); seeds pooled")


def console_text(report: Report) -> str:
    headers, rows = table_rows(report)
    parts = [describe(report)]
    if report.common:
        parts.append("common settings: " + " ".join(f"{k}={v}" for k, v in report.common.items()))
    parts.append("")
    parts.append(text_table(headers, rows, left=max(1, len(report.swept))))
    left_out = report.left_out
    if left_out:
        parts.append("")
        parts.append(f"not in the statistics ({len(left_out)} of {len(report.runs)} runs):")
        width = max(len(run.path) for run, _ in left_out)
        parts += [f"  {run.path.ljust(width)}  {why}" for run, why in left_out]
    return "\n".join(parts)


def markdown_text(report: Report, figures: Sequence[str]) -> str:
    headers, rows = table_rows(report)
    parts = ["# isaac-ppo report", "", describe(report) + ".", ""]
    if report.common:
        parts += ["Common settings: " + ", ".join(f"`{k}={v}`" for k, v in report.common.items()), ""]
    parts += [markdown_table(headers, rows, left=max(1, len(report.swept))), ""]
    left_out = report.left_out
    if left_out:
        parts += [f"Not in the statistics ({len(left_out)} of {len(report.runs)} runs):", ""]
        parts += [f"- `{run.path}`: {why}" for run, why in left_out]
        parts.append("")
    if figures:
        parts += [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in figures]
        parts.append("")
    return "\n".join(parts)


def write_csvs(report: Report, out: str) -> List[str]:
    """report.csv (one row per group, raw numbers) and runs.csv (one row per run)."""
    groups_path = os.path.join(out, "report.csv")
    with open(groups_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(report.swept + ["metric", "runs_complete", "runs_total", "runs_in_statistics", "iqm",
                                        "ci_low", "ci_high", "env_steps_median", "wall_s_mean"])
        for group in report.groups:
            writer.writerow([group.values[k] for k in report.swept] + [
                report.metric, sum(r.complete for r in group.runs), len(group.runs), len(group.used),
                _raw(group.iqm), _raw(group.ci[0]), _raw(group.ci[1]), _raw(group.env_steps), _raw(group.wall_s),
            ])
    runs_path = os.path.join(out, "runs.csv")
    with open(runs_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["folder", "group", "seed", "status", f"final_{report.metric}", "env_steps", "wall_s"])
        for group in report.groups:
            for run in group.runs:
                writer.writerow([run.path, group.label, run.seed if run.seed is not None else "", run.detail,
                                 _raw(final_value(run.rows, report.metric)), _raw(run.env_steps),
                                 _raw(run.wall_s)])
    return [groups_path, runs_path]


# ------------------------------------------------------------------------------------------ figures


def common_grid(series: Sequence[Tuple[np.ndarray, np.ndarray]],
                max_points: int = MAX_CURVE_POINTS) -> Tuple[np.ndarray, np.ndarray]:
    """(env steps, values of shape (runs, points)) on one grid: the env steps of the shortest run within the
    range every run covers, subsampled to max_points. Runs of one group share their env-step grid, so the
    interpolation returns the logged values; it only bridges points one run lacks (a null early return)."""
    start = max(float(x[0]) for x, _ in series)
    shortest = min(series, key=lambda s: float(s[0][-1]))[0]
    grid = shortest[shortest >= start]
    if len(grid) > max_points:
        grid = grid[np.unique(np.linspace(0, len(grid) - 1, max_points).round().astype(int))]
    return grid, np.stack([np.interp(grid, x, y) for x, y in series])


def group_curve(group: Group, metric: str) -> Optional[Tuple[np.ndarray, np.ndarray, List[str]]]:
    """(grid, values (runs, points), strata) of the group's runs in the statistics; None without data."""
    series, strata = [], []
    for run in group.used:
        x, y = metric_series(run.rows, metric)
        if len(x):
            series.append((x, y))
            strata.append(run.task)
    if not series:
        return None
    grid, values = common_grid(series)
    return (grid, values, strata) if len(grid) else None


def write_figures(report: Report, out: str) -> Tuple[List[str], List[str]]:
    """The PNG figures; (paths written, notes on figures skipped)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written, notes = [], []
    written.append(_plot_curves(plt, report, out))
    if report.swept:
        written.append(_plot_final(plt, report, out))
    else:
        notes.append("final_vs_<key>.png skipped: nothing is swept")
    diagnostics = _plot_diagnostics(plt, report, out)
    if diagnostics:
        written.append(diagnostics)
    else:
        notes.append("diagnostics.png skipped: no complete run logged diagnostics")
    return written, notes


def _plot_curves(plt: Any, report: Report, out: str) -> str:
    figure, ax = plt.subplots(figsize=(7, 4.2))
    for group in report.groups:
        curve = group_curve(group, report.metric)
        if curve is None:
            continue
        grid, values, strata = curve
        low, high = stratified_bootstrap_ci(values, strata, report.reps, report.seed)
        (line,) = ax.plot(grid, iqm(values), lw=1.4, marker=_marker(grid), ms=3,
                          label=f"{group.label} (n={len(strata)})")
        ax.fill_between(grid, low, high, color=line.get_color(), alpha=0.2, lw=0)
    ax.set_xlabel("env steps")
    ax.set_ylabel(f"IQM {report.metric}")
    ax.set_title(f"{report.metric}: IQM and pointwise 95% bootstrap CI", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _save(plt, figure, os.path.join(out, f"curve_{_file_part(report.metric)}.png"))


def _plot_final(plt: Any, report: Report, out: str) -> str:
    key, others = report.swept[0], report.swept[1:]
    xs = [group.values[key] for group in report.groups]
    numbers = [_as_float(x) for x in xs]
    numeric = all(n is not None for n in numbers)
    distinct = sorted(set(xs), key=_value_key)
    log2 = numeric and len(distinct) > 1 and all(_power_of_two(_as_float(x)) for x in distinct)

    def position(value: str) -> float:
        return float(value) if numeric else float(distinct.index(value))

    figure, ax = plt.subplots(figsize=(6.5, 4.2))
    lines: Dict[Tuple[str, ...], List[Group]] = {}
    for group in report.groups:
        if group.used:
            lines.setdefault(tuple(group.values[k] for k in others), []).append(group)
    for combination, members in lines.items():
        members = sorted(members, key=lambda g: _value_key(g.values[key]))
        x = [position(g.values[key]) for g in members]
        y = np.array([g.iqm for g in members])
        err = np.array([[g.iqm - g.ci[0] for g in members], [g.ci[1] - g.iqm for g in members]])
        label = ", ".join(f"{k}={v}" for k, v in zip(others, combination)) or None
        ax.errorbar(x, y, yerr=np.clip(err, 0, None), marker="o", capsize=3, lw=1.2, label=label)
    if log2:
        ax.set_xscale("log", base=2)
        ax.minorticks_off()
    ax.set_xticks([position(v) for v in distinct])
    ax.set_xticklabels(distinct, rotation=30 if not numeric else 0, fontsize=8)
    ax.set_xlabel(key)
    ax.set_ylabel(f"final IQM {report.metric}")
    ax.set_title(f"final {report.metric} vs {key} (95% bootstrap CI)", fontsize=10)
    if others and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _save(plt, figure, os.path.join(out, f"final_vs_{_file_part(key)}.png"))


def diagnostic_names(runs: Sequence[Run]) -> List[str]:
    """The scalar diagnostics logged by the runs, in the order of the run panels."""
    from isaac_ppo.diagnostics.panel import PREFERRED

    names: Dict[str, None] = {}
    for run in runs:
        for row in run.rows:
            nested = row.get("diagnostics")
            if isinstance(nested, dict):
                for name, value in nested.items():
                    if _number(value) is not None:
                        names.setdefault(name, None)
    return [n for n in PREFERRED if n in names] + sorted(n for n in names if n not in PREFERRED)


def _plot_diagnostics(plt: Any, report: Report, out: str) -> Optional[str]:
    used = [run for group in report.groups for run in group.used]
    names = diagnostic_names(used)
    if not names:
        return None
    columns = min(4, len(names))
    lines = math.ceil(len(names) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(4 * columns, 2.8 * lines), squeeze=False)
    for ax, name in zip(axes.flat, names):
        for group in report.groups:
            curve = group_curve(group, "diagnostics." + name)
            if curve is not None:
                grid, values, _ = curve
                ax.plot(grid, iqm(values), lw=1.2, marker=_marker(grid), ms=3, label=group.label)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("env steps", fontsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if len(report.groups) > 1 and handles:
        figure.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=7)
        figure.tight_layout(rect=(0, 0.06, 1, 1))
    else:
        figure.tight_layout()
    return _save(plt, figure, os.path.join(out, "diagnostics.png"))


def _save(plt: Any, figure: Any, path: str) -> str:
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return path


def _marker(grid: np.ndarray) -> Optional[str]:
    # a line through few points hides them (one point draws nothing at all)
    return "o" if len(grid) <= 20 else None


def _power_of_two(value: Optional[float]) -> bool:
    return value is not None and value > 0 and value == int(value) and (int(value) & (int(value) - 1)) == 0


def _file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name)


# ------------------------------------------------------------------------------------------ formatting


def _fmt_value(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if 1e4 <= abs(value) < 1e9:
        return f"{value:.0f}"
    return f"{value:.4g}"


def _fmt_steps(value: Optional[float]) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.1f}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def _fmt_duration(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _raw(value: Optional[float]) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))  # env steps read back as 24576, not 24576.0
    return repr(float(value))


# ------------------------------------------------------------------------------------------ CLI


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Summarise isaac-ppo-train runs (single runs or multirun folders): per group of swept "
                    "overrides (seeds pooled), the IQM of the final metric with a 95%% stratified bootstrap CI; "
                    "writes report.md, report.csv, runs.csv and figures.",
    )
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="run or multirun folders (searched recursively)")
    parser.add_argument("--metric", default="mean_return",
                        help="a key of metrics.jsonl rows, or diagnostics.NAME (default: mean_return)")
    parser.add_argument("--out", default=None, help="output folder (default: <first DIR>/report)")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap resamples (default: 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default: 0)")
    return parser.parse_args(list(argv))


def run_report(args: argparse.Namespace) -> List[str]:
    """Gather, print and write the report; the paths written."""
    if args.reps < 1:
        raise UserError(f"--reps {args.reps}: needs at least 1 resample")
    out = args.out if args.out is not None else os.path.join(args.dirs[0], "report")
    report = gather(args.dirs, args.metric, args.reps, args.seed, skip=[out])
    print(console_text(report))
    os.makedirs(out, exist_ok=True)
    figures, notes = write_figures(report, out)
    written = write_csvs(report, out)
    md_path = os.path.join(out, "report.md")
    with open(md_path, "w") as f:
        f.write(markdown_text(report, figures))
    written = [md_path] + written + figures
    print("")
    for note in notes:
        print(note)
    print("wrote:")
    for path in written:
        print(f"  {path}")
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run_report(args)
    except UserError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        raise SystemExit(2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
