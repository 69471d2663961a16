"""A study's claim_curves.png: a panel a claim, the evaluation curves of the arms its comparisons name.

compare.md gives each verdict as numbers and compare.png as CIs; this figure shows the curves they come from (each
seed thin, the seeds' median bold), one claim at a time: a study's all-arm figure of a dozen arms cannot be read.
"""
from __future__ import annotations

import math
import os
from typing import Dict, List, Optional

import numpy as np

from isaac_ppo.lab.report.clock import eval_curve, measure_name
from isaac_ppo.lab.watch import RETURN_MEAN, read_rows


def plot_claim_curves(runs: Dict[str, List[str]], arms_of_claim: Dict[str, List[str]],
                      path: str, measure: str = RETURN_MEAN) -> Optional[str]:
    """claim_curves.png: one panel a claim, the evaluation (of the measure: the return unless told) of the arms it
    compares against env steps (each
    seed thin, the median of the seeds bold at the env steps where all of them evaluated), so that every verdict
    can be read off the curves behind it, which a study's all-arm figure of a dozen arms does not allow. None when
    no claim has an arm with an evaluation. arms_of_claim: compare.claim_arms."""
    panels = {}
    for claim, arms in arms_of_claim.items():
        of_runs = {arm: [eval_curve(read_rows(os.path.join(f, "metrics.jsonl")), measure) for f in runs.get(arm, [])]
                   for arm in arms}
        curves = {arm: [c for c in of_arm if c] for arm, of_arm in of_runs.items() if any(of_arm)}
        if curves:
            panels[claim] = curves
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(3, len(panels))
    lines = math.ceil(len(panels) / columns)
    figure, grid = plt.subplots(lines, columns, figsize=(5.2 * columns, 3.8 * lines), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for axes, (claim, curves) in zip(grid.flat, panels.items()):
        for (arm, of_arm), colour in zip(curves.items(), colours * 2):
            for curve in of_arm:
                steps = sorted(curve)
                axes.plot(steps, [curve[s] for s in steps], color=colour, alpha=0.25, linewidth=0.8)
            common = sorted(set.intersection(*(set(curve) for curve in of_arm)))
            axes.plot(common, [float(np.median([curve[s] for curve in of_arm])) for s in common], color=colour,
                      linewidth=2.2, marker="o", markersize=3, label=f"{arm} (median of {len(of_arm)})")
        axes.set_title(f"claim {claim}", fontsize=9)
        axes.set_xlabel("env steps", fontsize=8)
        axes.set_ylabel(f"evaluation {measure_name(measure)}", fontsize=8)
        axes.tick_params(labelsize=7)
        axes.legend(fontsize=7, loc="upper left")
    for axes in list(grid.flat)[len(panels):]:
        axes.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path

