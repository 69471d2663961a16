"""Figures: the report's PNG figures, drawn with matplotlib (Agg).

The metric's IQM curves with pointwise CIs, the final IQM vs the first swept key, and the diagnostics panel.
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from isaac_ppo.lab.report.groups import Group, Report, _as_float, _value_key
from isaac_ppo.lab.report.runs import Run, _number, metric_series
from isaac_ppo.stats import iqm, stratified_bootstrap_ci

MAX_CURVE_POINTS = 200


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
        label = ", ".join(g.name for g in members) if all(g.name for g in members) else (
            ", ".join(f"{k}={v}" for k, v in zip(others, combination)) or None)
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
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)  # below: never over a point
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
