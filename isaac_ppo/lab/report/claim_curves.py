"""A study's claim_curves.png: a panel a claim, the evaluation curves of the arms its comparisons name.

compare.md gives each verdict as numbers and compare.png as CIs; this figure shows the curves they come from (each
seed thin, the seeds' median bold), one claim at a time: a study's all-arm figure of a dozen arms cannot be read.
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from isaac_ppo.lab.report.clock import evaluations
from isaac_ppo.lab.watch import read_rows

AUC_SUFFIX = " (AUC)"  # a claim's second line on the area under the curve ("4 (AUC)"): the same arms as "4"


def claim_arms(comparisons: Sequence[Dict[str, Any]]) -> Dict[str, List[str]]:
    """Each claim -> the arms its comparisons name (an interaction's four included), in the order first named; a
    claim's AUC line is folded into the claim it repeats."""
    arms: Dict[str, List[str]] = {}
    for c in comparisons:
        claim = c["claim"][:-len(AUC_SUFFIX)] if c["claim"].endswith(AUC_SUFFIX) else c["claim"]
        named = arms.setdefault(claim, [])
        named += [arm for arm in _arms(c["a"]) + _arms(c["b"]) if arm not in named]
    return arms


def plot_claim_curves(runs: Dict[str, List[str]], comparisons: Sequence[Dict[str, Any]],
                      path: str) -> Optional[str]:
    """claim_curves.png: one panel a claim, the evaluation return of the arms it compares against env steps (each
    seed thin, the median of the seeds bold at the env steps where all of them evaluated), so that every verdict
    can be read off the curves behind it, which a study's all-arm figure of a dozen arms does not allow. None when
    no claim has an arm with an evaluation."""
    panels = {}
    for claim, arms in claim_arms(comparisons).items():
        curves = {arm: [_eval_curve(os.path.join(f, "metrics.jsonl")) for f in runs.get(arm, [])] for arm in arms}
        curves = {arm: [c for c in of_arm if c] for arm, of_arm in curves.items()}
        if any(curves.values()):
            panels[claim] = {arm: of_arm for arm, of_arm in curves.items() if of_arm}
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
        axes.set_ylabel("evaluation return", fontsize=8)
        axes.tick_params(labelsize=7)
        axes.legend(fontsize=7, loc="upper left")
    for axes in list(grid.flat)[len(panels):]:
        axes.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _arms(side: Any) -> List[str]:
    """A comparison's side: one arm, or [HI, LO] for an interaction (as compare.arm_names)."""
    return list(side) if isinstance(side, (list, tuple)) else [side]


def _eval_curve(rows_path: str) -> Dict[int, float]:
    """env steps -> evaluation return of a run's periodic evaluations."""
    return {steps: value for _, steps, value in evaluations(read_rows(rows_path))}
