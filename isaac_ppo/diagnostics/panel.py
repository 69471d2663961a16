"""diagnostics.png at the end of a run: each diagnostic against env steps, beside the return curve."""
from __future__ import annotations

import json
import math
import os
from typing import Dict, List, Optional, Tuple

# the panels, in order: what the seed paper plots first
PREFERRED = ("feature_rank", "feature_rank_critic", "dormant_fraction", "std_ratio_min", "ess", "weight_norm_actor",
             "weight_norm_critic", "grad_kurtosis_actor", "grad_kurtosis_critic", "policy_variance", "mu_variance")


def write_panel(run_dir: str, max_panels: int = 12) -> Optional[str]:
    """Plot the run's metrics.jsonl to run_dir/diagnostics.png; None when nothing was measured."""
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    series: Dict[str, List[Tuple[int, float]]] = {}
    for row in rows:
        for key, value in row.get("diagnostics", {}).items():
            if value is not None and math.isfinite(value):
                series.setdefault(key, []).append((row["env_steps"], value))
    if not series:
        return None
    # a Figure on the Agg canvas, without pyplot: pyplot's import and tight_layout's measuring of every label were
    # ~1 s of a 2-core run's end (the layout is fixed, so the margins below can be too)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    keys = [k for k in PREFERRED if k in series] + sorted(k for k in series if k not in PREFERRED)
    keys = keys[: max_panels - 1]
    columns = 4
    lines = math.ceil((len(keys) + 1) / columns)
    height = 2.8 * lines
    figure = Figure(figsize=(4 * columns, height))
    FigureCanvasAgg(figure)
    # margins in inches, turned into fractions: room for the titles, tick labels and x labels at any number of lines
    axes = figure.subplots(lines, columns, squeeze=False, gridspec_kw=dict(
        left=0.045, right=0.99, top=1 - 0.3 / height, bottom=0.45 / height, wspace=0.28, hspace=0.5))
    training = [(r["env_steps"], r["window_mean_return"]) for r in rows if r.get("window_mean_return") is not None]
    evaluated = [(r["env_steps"], r["eval"]["return_mean"]) for r in rows
                 if r.get("eval", {}).get("return_mean") is not None]
    panels = [("return: eval (o), training window (lagged)", training)] + [(key, series[key]) for key in keys]
    for ax, (title, points) in zip(axes.flat, panels):
        if points:  # (a marker on each point: a run measured once or twice draws no visible line)
            ax.plot([p[0] for p in points], [p[1] for p in points], lw=1.2, marker="o" if len(points) < 10 else None,
                    ms=3)
        if points is training and evaluated:
            ax.plot([p[0] for p in evaluated], [p[1] for p in evaluated], "o-", ms=3, lw=1.2)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("env steps", fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    path = os.path.join(run_dir, "diagnostics.png")
    figure.savefig(path + ".tmp.png", dpi=90)
    os.replace(path + ".tmp.png", path)
    return path
