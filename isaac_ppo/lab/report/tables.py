"""Tables: the summary as console text and report.md, report.csv and runs.csv, and the number formatting."""
from __future__ import annotations

import csv
import math
import os
from typing import List, Optional, Sequence, Tuple

from isaac_ppo.lab.archive import shown
from isaac_ppo.lab.report.groups import Goal, Report, goal_order
from isaac_ppo.lab.watch import RETURN_MEAN
from isaac_ppo.lab.report.runs import EVAL_METRIC, TRAINING_METRIC, _fmt_steps, run_final


def table_rows(report: Report) -> Tuple[List[str], List[List[str]]]:
    """The summary table as (headers, formatted cells), shared by the console and report.md."""
    keys = _key_headers(report)
    named = keys[0] == "name"
    goals = goal_order({goal for group in report.groups for goal in group.solve})
    headers = keys + ["runs", f"IQM {report.metric}", "95% CI", "env steps", "wall"] + [
        f"time to {_goal_text(goal)} (IQM [CI], reached)" for goal in goals]
    rows = []
    for group in report.groups:
        cells = [group.values[k] for k in report.swept] if report.swept else ([] if named else ["all"])
        cells = ([group.name or "-"] if named else []) + cells
        complete = sum(run.complete for run in group.runs)
        cells.append(f"{complete}/{len(group.runs)}")
        if group.used:
            low, high = group.ci
            ci = f"[{_fmt_value(low)}, {_fmt_value(high)}]" + (" n=1" if len(group.used) == 1 else "")
            cells += [_fmt_value(group.iqm), ci, _fmt_steps(group.env_steps), _fmt_duration(group.wall_s)]
        else:
            cells += ["-", "-", "-", "-"]
        for goal in goals:
            reached, runs, value, (low, high) = group.solve.get(goal, (0, 0, math.nan, (math.nan, math.nan)))
            timing = f"{_fmt_duration(value)} [{_fmt_duration(low)}, {_fmt_duration(high)}] " if reached else ""
            cells.append(f"{timing}{reached}/{runs}")
        rows.append(cells)
    return headers, rows


def _goal_text(goal: Goal) -> str:
    """A return threshold as the number (time to 3000), a measure's with its name (time to drawer_opened 0.9)."""
    measure, threshold = goal
    return _fmt_value(threshold) if measure == RETURN_MEAN else f"{measure} {_fmt_value(threshold)}"


def _key_headers(report: Report) -> List[str]:
    """The leading columns that name each group (left-aligned): its name when groups are named (a study's arms),
    then the swept keys; "group" when there is neither."""
    named = any(group.name for group in report.groups)
    return (["name"] if named else []) + (report.swept or ([] if named else ["group"]))


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


# the training statistics of the episodes: lagged behind the policy, and mixing many policy versions
TRAINING_METRICS = (TRAINING_METRIC, "window_mean_length", "batch_mean_return", "batch_mean_length")


def describe(report: Report) -> str:
    if report.metric.startswith("eval."):
        what = "each run's end-of-run evaluation, else its last one: unbiased and unlagged"
    else:
        what = "each run's last logged value" + ("; a lagged training statistic: runs that evaluate (eval.interval_env_steps, "
                                                 f"eval.final) are compared on {EVAL_METRIC}"
                                                 if report.metric in TRAINING_METRICS else "")
    return (f"metric: {report.metric} ({what}); IQM over complete runs with a 95% stratified bootstrap CI "
            f"({report.reps} resamples, seed {report.seed}); seeds pooled")


def console_text(report: Report) -> str:
    headers, rows = table_rows(report)
    parts = [describe(report)]
    if report.common:
        parts.append("common settings: " + " ".join(f"{k}={v}" for k, v in report.common.items()))
    parts.append("")
    parts.append(text_table(headers, rows, left=len(_key_headers(report))))
    left_out = report.left_out
    if left_out:
        parts.append("")
        parts.append(f"not in the statistics ({len(left_out)} of {len(report.runs)} runs):")
        width = max(len(shown(run.path)) for run, _ in left_out)
        parts += [f"  {shown(run.path).ljust(width)}  {why}" for run, why in left_out]
    return "\n".join(parts)


def markdown_text(report: Report, figures: Sequence[str]) -> str:
    headers, rows = table_rows(report)
    parts = ["# isaac-ppo report", "", describe(report) + ".", ""]
    if report.common:
        parts += ["Common settings: " + ", ".join(f"`{k}={v}`" for k, v in report.common.items()), ""]
    parts += [markdown_table(headers, rows, left=len(_key_headers(report))), ""]
    left_out = report.left_out
    if left_out:
        parts += [f"Not in the statistics ({len(left_out)} of {len(report.runs)} runs):", ""]
        parts += [f"- `{shown(run.path)}`: {why}" for run, why in left_out]
        parts.append("")
    if figures:
        parts += [f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in figures]
        parts.append("")
    return "\n".join(parts)


def write_csvs(report: Report, out: str) -> List[str]:
    """report.csv (one row per group, raw numbers) and runs.csv (one row per run)."""
    groups_path = os.path.join(out, "report.csv")
    goals = goal_order({goal for group in report.groups for goal in group.solve})
    with open(groups_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(report.swept + ["metric", "runs_complete", "runs_total", "runs_in_statistics", "iqm",
                                        "ci_low", "ci_high", "env_steps_median", "wall_s_mean"] + [
            f"time_to_{'' if measure == RETURN_MEAN else measure + '_'}{_raw(t)}_{what}" for measure, t in goals
            for what in ("reached", "iqm_s", "ci_low_s", "ci_high_s")])
        for group in report.groups:
            solve = [group.solve.get(goal, (0, 0, math.nan, (math.nan, math.nan))) for goal in goals]
            writer.writerow([group.values[k] for k in report.swept] + [
                report.metric, sum(r.complete for r in group.runs), len(group.runs), len(group.used),
                _raw(group.iqm), _raw(group.ci[0]), _raw(group.ci[1]), _raw(group.env_steps), _raw(group.wall_s),
            ] + [cell for reached, _, value, (low, high) in solve for cell in (reached, _raw(value), _raw(low),
                                                                                _raw(high))])
    runs_path = os.path.join(out, "runs.csv")
    with open(runs_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["folder", "group", "seed", "status", f"final_{report.metric}", "env_steps", "wall_s"])
        for group in report.groups:
            for run in group.runs:
                writer.writerow([_shown_path(run.path), group.label, run.seed if run.seed is not None else "", run.detail,
                                 _raw(run_final(run, report.metric)), _raw(run.env_steps),
                                 _raw(run.wall_s)])
    return [groups_path, runs_path]


def _shown_path(path: str) -> str:
    """A run folder below the working directory as a relative path (a report committed beside its runs names them
    the same on every checkout), any other as given."""
    path = shown(path)  # (a run read from a packed archive: named as in the archive's folder)
    relative = os.path.relpath(os.path.abspath(path))
    return path if relative.startswith("..") else relative


# ------------------------------------------------------------------------------------------ formatting


def _fmt_value(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if 1e4 <= abs(value) < 1e9:
        return f"{value:.0f}"
    return f"{value:.4g}"


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
