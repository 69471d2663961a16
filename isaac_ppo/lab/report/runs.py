"""Reading runs: the run folders below a path, each run's overrides, config, metrics and status.

A run is a folder with .hydra/overrides.yaml that isaac-ppo-train (or the rl-games bridge) wrote; its
metrics.jsonl rows and metrics.json summary say how far it got (complete, stopped, crashed or running, empty).
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from isaac_ppo.errors import UserError

COMPLETE, STOPPED, CRASHED, EMPTY = "complete", "stopped", "crashed or running", "empty"
# folders inside a run that never hold runs: pruned to keep the walk over big sweeps quick
NOT_RUNS = {".hydra", "tb", "checkpoints", "__pycache__"}
# overrides that say where a run writes, not how it trains: never a group key, so runs named per seed
# (experiment=ant_s0, ant_s1) or gathered from several runs_dirs pool like any seeds of one setting
# overrides that say where a run writes or where it continues from, not what it is: never a swept setting (a run
# resumed with resume=auto is the same setting as the one it continues)
OUTPUT_KEYS = {"experiment", "runs_dir", "hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir", "resume"}
NESTED = ("diagnostics", "eval", "reward_terms", "task_state")  # rows' nested dicts of metrics (diagnostics.NAME, eval.NAME, ...)
EVAL_METRIC = "eval.return_mean"
TRAINING_METRIC = "window_mean_return"  # the fallback for runs that did not evaluate: lagged


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
    parts: List[str] = field(default_factory=list)  # the folders of the runs it continues (join_resumed)

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


def join_resumed(runs: Sequence[Run]) -> List[Run]:
    """Runs continued into a new folder (resume=auto or resume=PATH: config.yaml's `resume` names the checkpoint)
    joined to the runs they continue: one run per chain, the last folder's, whose rows are the earlier parts'
    rows before its first iteration followed by its own. The earlier parts are no longer runs of their own."""
    by_folder = {os.path.realpath(run.path): run for run in runs}

    def predecessor(run: Run) -> Optional[Run]:
        resumed = run.config.get("resume")
        if not isinstance(resumed, str) or not resumed.endswith(".pt"):
            return None
        found = by_folder.get(os.path.realpath(os.path.dirname(os.path.dirname(resumed))))
        return found if found is not run else None

    parts = {id(before) for before in map(predecessor, runs) if before is not None}
    joined = []
    for run in runs:
        if id(run) in parts:
            continue
        before, chain = predecessor(run), [run]
        while before is not None and all(before is not part for part in chain):
            chain.append(before)
            before = predecessor(before)
        rows = list(run.rows)
        for earlier in chain[1:]:
            start = rows[0]["iteration"] if rows and "iteration" in rows[0] else math.inf
            rows = [row for row in earlier.rows if row.get("iteration", math.inf) < start] + rows
        run.rows = rows
        run.parts = [earlier.path for earlier in reversed(chain[1:])]
        joined.append(run)
    return joined


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
    """The metric in one metrics.jsonl row (`diagnostics.NAME` and `eval.NAME` reach into the nested dicts), or
    None."""
    for group in NESTED:
        if metric.startswith(group + "."):
            nested = row.get(group)
            return _number(nested.get(metric[len(group) + 1:])) if isinstance(nested, dict) else None
    return _number(row.get(metric))


def run_final(run: Run, metric: str) -> Optional[float]:
    """A run's final value of the metric: for an eval.NAME, its end-of-run evaluation (metrics.json final_eval)
    when it has one, else the last value its rows logged."""
    final_eval = (run.summary or {}).get("final_eval")
    if metric.startswith("eval.") and isinstance(final_eval, dict):
        value = _number(final_eval.get(metric[len("eval."):]))
        if value is not None:
            return value
    return final_value(run.rows, metric)


def default_metric(runs: Sequence[Run]) -> str:
    """What to compare runs on when no --metric is given: the evaluation's mean return when any run evaluated
    (unbiased, unlagged), else the training return window_mean_return (lagged)."""
    evaluated = any(isinstance((run.summary or {}).get("final_eval"), dict) or any("eval" in row for row in run.rows)
                    for run in runs)
    return EVAL_METRIC if evaluated else TRAINING_METRIC


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
                if key in NESTED and isinstance(value, dict):
                    for name, inner in value.items():
                        if inner is None or _number(inner) is not None:
                            nested.setdefault(f"{key}.{name}", None)
                elif value is None or _number(value) is not None:
                    top.setdefault(key, None)
    return list(top) + list(nested)


def check_metric(runs: Sequence[Run], metric: str) -> None:
    if any(metric_value(row, metric) is not None for run in runs for row in run.rows):
        return
    if metric.startswith("eval.") and any(run_final(run, metric) is not None for run in runs):
        return  # (evaluated only at the end)
    logged = [key for key in available_metrics(runs) if key != metric]
    # a sample of both kinds, so the diagnostics.NAME form shows up even behind dozens of top-level keys
    top = [key for key in logged if not key.startswith("diagnostics.")]
    nested = [key for key in logged if key.startswith("diagnostics.")]
    picked = top[:10] + nested[:3]
    more = len(logged) - len(picked)
    shown = ", ".join(picked) + (f", ... ({more} more)" if more else "")
    raise UserError(f"--metric {metric} is not logged in any run's metrics.jsonl: choose one of {shown or '(none)'}")


def _natural_key(path: str) -> List[Any]:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", path)]


# the env steps in a stopped run's status words; the tables print their env steps column with it too
def _fmt_steps(value: Optional[float]) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.1f}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"
