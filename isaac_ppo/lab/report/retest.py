"""A second reading of a study's final comparisons: the same final policies, evaluated a second time.

A run whose budget ends on an evaluation interval evaluated its final policy twice: at its last periodic evaluation
and at the end (metrics.json final_eval), on other episodes. Every final comparison of the study is made again on
the second evaluation, beside the first, with the two evaluations' agreement over all runs (Spearman, mean
|difference|). Where the evaluation's episodes cannot rank the policies (robots that do not yet do the task), a
verdict on the final evaluation may be the evaluation's noise; this says so. Reported beside the verdicts, never
one: retest.json and retest.md beside compare.md.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from isaac_ppo.lab.report.compare import _expected, compare, final_return, label, spearman
from isaac_ppo.lab.watch import RETURN_MEAN, read_rows


def second_return(folder: str, measure: str = RETURN_MEAN) -> Optional[float]:
    """The run's second evaluation of its final policy (of the measure: its return unless told): its last periodic
    evaluation, when that one evaluated the policy metrics.json's final_eval evaluates (same policy_version); else
    None."""
    path = os.path.join(folder, "metrics.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        final = (json.load(f) or {}).get("final_eval")
    if not isinstance(final, dict) or final.get("policy_version") is None:
        return None
    periodic = [row["eval"] for row in read_rows(os.path.join(folder, "metrics.jsonl"))
                if isinstance(row.get("eval"), dict) and isinstance(row["eval"].get(measure), (int, float))]
    if not periodic or periodic[-1].get("policy_version") != final["policy_version"]:
        return None
    return float(periodic[-1][measure])


def retest(runs: Dict[str, List[str]], specs: Sequence[Dict[str, Any]],
           flagged: Optional[Dict[str, str]] = None, measure: str = RETURN_MEAN) -> Optional[Dict[str, Any]]:
    """Each final comparison of `specs`, read on the first (final_eval) and the second evaluation of the measure,
    and the two evaluations' agreement over every run that has both; None when fewer than 3 runs have a second
    one."""
    pairs = [(final_return(folder, measure), second_return(folder, measure)) for arm in runs for folder in runs[arm]]
    pairs = [(first, second) for first, second in pairs if first is not None and second is not None]
    if len(pairs) < 3:
        return None
    first, second = [p[0] for p in pairs], [p[1] for p in pairs]
    rho = spearman(first, second)  # (NaN when every run has the same value: None, compare.json's strict JSON)
    finals = [spec for spec in specs if spec.get("metric", "final") == "final"]
    return {"runs": len(pairs), "spearman": None if math.isnan(rho) else rho,
            "mean_abs_difference": float(np.mean(np.abs(np.subtract(first, second)))),
            "comparisons": [{"first": compare(runs, spec, flagged, measure=measure),
                             "second": compare(runs, spec, flagged, final=second_return, measure=measure)}
                            for spec in finals]}


def markdown(again: Dict[str, Any]) -> str:
    rho = again["spearman"]
    lines = ["# The final comparisons on a second evaluation of the same final policies", "",
             "Each run's last periodic evaluation evaluated the policy its final evaluation evaluates, on other "
             "episodes. Not a verdict (the study's verdicts read the final evaluation, compare.md): a measure of how "
             f"much of each is the evaluation's noise. Over {again['runs']} runs the two evaluations agree with "
             f"Spearman {'n/a' if rho is None else format(rho, '+.2f')}, mean |first - second| "
             f"{again['mean_abs_difference']:.4g}.", "",
             "| claim | a vs b | expected | first: a - b (95% CI) | verdict | second: a - b (95% CI) | the rule on the "
             "second |", "|---|---|---|---|---|---|---|"]
    for pair in again["comparisons"]:
        first, second = pair["first"], pair["second"]
        lines.append(f"| {first['claim']} | {label(first['a'])} vs {label(first['b'])} | {_expected(first)} | "
                     f"{_difference(first)} | {first['verdict']} | {_difference(second)} | {second['verdict']} |")
    return "\n".join(lines) + "\n"


def _difference(c: Dict[str, Any]) -> str:
    if "difference" not in c:
        return ""
    low, high = c["ci95"]
    return f"{c['difference']:+.4g} ({low:+.4g} to {high:+.4g})"


def write(runs: Dict[str, List[str]], study: Dict[str, Any], out: str,
          flagged: Optional[Dict[str, str]] = None) -> List[str]:
    """retest.json and retest.md under out (the paths written; none when no run has a second evaluation)."""
    again = retest(runs, study["compare"], flagged, study.get("measure") or RETURN_MEAN)
    if again is None:
        return []
    paths = [os.path.join(out, "retest.json"), os.path.join(out, "retest.md")]
    with open(paths[0], "w") as f:
        json.dump(again, f, indent=1)
    with open(paths[1], "w") as f:
        f.write(markdown(again))
    return paths
