"""The wall-clock view of a study's arms: time to each threshold, the evaluation at fixed minutes, where the time
went, and the evaluation against seconds and against env steps. "The evaluation" is the study's `measure`: its mean
return (return_mean, the default), or a measure of success the task declares thresholds for (solve_measures:
FrankaCabinet's drawer_opened, ShadowHand's successes).

Every number is read from the runs' metrics.jsonl on one clock (isaac_ppo.lab.watch.Progress: the training's wall_s
plus every evaluation's seconds, as metrics.json's solve_times counts it). A seed that never reached a threshold
counts as not reached: its time is infinite, so the median is finite only while more than half the seeds reached
it, and the bootstrap CI's upper end says "not reached" when resamples of misses decide it.
"""
from __future__ import annotations

import json
import math
import os
import random
import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from isaac_ppo.lab.watch import RETURN_MEAN, Progress, clock_s, read_rows

# the metrics.jsonl keys kept in a study's small per-run copies (everything a claim or a figure is read from)
KEPT = ("iteration", "env_steps", "wall_s", "collect_s", "update_s", "num_envs", "rollout_length", "epochs",
        "minibatches", "lr", "kl", "window_mean_return", "window_mean_length", "diverged", "eval", "diagnostics")
# a copy keeps every row with an evaluation or diagnostics and at most this many others (evenly spaced): small
# enough to commit beside a paper for runs of thousands of iterations
MAX_PLAIN_ROWS = 400
# a thinned copy keeps these rows whatever the stride says (the figures a report reads)
KEPT_WHOLE = ("eval", "diagnostics")
# per-iteration amounts a report sums over a run's rows (where the time went, divergences): a dropped row's are
# carried into the next kept row, so the sums over a thinned run are the full run's
SUMMED = ("collect_s", "update_s", "diverged")


def thinned(rows: Sequence[Dict[str, Any]], every: int) -> List[Dict[str, Any]]:
    """Every `every`th row, every row holding an evaluation or diagnostics, and the last; each kept row (a copy:
    rows are not changed) carries the SUMMED amounts of the rows dropped before it."""
    kept: List[Dict[str, Any]] = []
    carried: Dict[str, float] = {}
    for i, row in enumerate(rows):
        if i % every == 0 or i == len(rows) - 1 or any(key in row for key in KEPT_WHOLE):
            kept.append(dict(row, **{key: row.get(key, 0) + amount for key, amount in carried.items()}))
            carried = {}
        else:
            for key in SUMMED:
                if key in row:
                    carried[key] = carried.get(key, 0) + row[key]
    return kept


def evaluations(rows: Sequence[Dict[str, Any]], measure: str = RETURN_MEAN) -> List[Tuple[float, int, float]]:
    """(clock seconds, env steps, the measure: return_mean unless told) of every evaluation in the rows."""
    progress, points = Progress(), []
    for row in rows:
        progress.add(row)
        evaluation = row.get("eval")
        if isinstance(evaluation, dict) and isinstance(evaluation.get(measure), (int, float)):
            points.append((progress.elapsed, int(evaluation.get("env_steps", row.get("env_steps", 0))),
                           float(evaluation[measure])))
    return points


def eval_curve(rows: Sequence[Dict[str, Any]], measure: str = RETURN_MEAN) -> Dict[int, float]:
    """env steps -> the measure (return_mean unless told) of every periodic evaluation."""
    return {steps: value for _, steps, value in evaluations(rows, measure)}


def measure_name(measure: str) -> str:
    """The measure in a table's or a figure's words: "return" for return_mean, else its own name."""
    return "return" if measure == RETURN_MEAN else measure


def bootstrap_median_ci(values: Sequence[float], reps: int = 10000, seed: int = 0) -> Tuple[float, float]:
    """95% percentile-bootstrap CI of the median (inf entries: not reached)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(list(values), k=len(values))) for _ in range(reps))
    return medians[int(0.025 * reps)], medians[int(0.975 * reps) - 1]


def summarise_arm(runs: Sequence[Sequence[Dict[str, Any]]], thresholds: Sequence[float],
                  marks_min: Sequence[float], measure: str = RETURN_MEAN) -> Dict[str, Any]:
    """One arm's numbers from its runs' metrics rows, on the evaluation's `measure`."""
    evals = [evaluations(rows, measure) for rows in runs]
    out: Dict[str, Any] = {"runs": len(runs)}
    for threshold in thresholds:
        seconds, steps = [], []
        for points in evals:
            hit = next(((s, e) for s, e, r in points if r >= threshold), (math.inf, None))
            seconds.append(hit[0])
            steps.append(hit[1])
        key = f"to_{threshold:g}"
        out[f"{key}_reached"] = f"{sum(math.isfinite(s) for s in seconds)}/{len(runs)}"
        out[f"{key}_s"] = [round(s, 1) if math.isfinite(s) else None for s in seconds]
        median = statistics.median(seconds)
        low, high = bootstrap_median_ci(seconds)
        out[f"{key}_median_s"] = round(median, 1) if math.isfinite(median) else None
        out[f"{key}_ci95_s"] = [round(v, 1) if math.isfinite(v) else None for v in (low, high)]
        out[f"{key}_env_steps"] = steps
    for minutes in marks_min:
        values = []
        for rows, points in zip(runs, evals):
            before = [r for s, _, r in points if s <= 60 * minutes]
            if before and clock_s(rows) >= 60 * minutes - 1:  # (a run that ended earlier has no value there)
                values.append(before[-1])
        out[f"eval_at_{minutes:g}min"] = [round(v, 1) for v in values]
        out[f"eval_at_{minutes:g}min_median"] = round(statistics.median(values), 1) if values else None
    totals = {"collect": 0.0, "update": 0.0, "evaluation": 0.0, "clock": 0.0, "env_steps": 0, "diverged": 0}
    for rows in runs:
        totals["diverged"] += sum(row.get("diverged", 0) for row in rows)
        totals["collect"] += sum(row.get("collect_s", 0.0) for row in rows)
        totals["update"] += sum(row.get("update_s", 0.0) for row in rows)
        totals["evaluation"] += sum(row["eval"].get("seconds", 0.0) for row in rows if isinstance(row.get("eval"), dict))
        totals["clock"] += clock_s(rows)
        totals["env_steps"] += rows[-1].get("env_steps", 0) if rows else 0
    whole = totals["clock"] or 1.0
    shares = {k: round(totals[k] / whole, 3) for k in ("collect", "update", "evaluation")}
    # the rest is what the clock holds beyond the three timed parts; their rounding (or their timers overlapping the
    # clock's by a few ms) can leave it a hair below 0, which a table would print as "-0%"
    shares["rest"] = max(0.0, round(1.0 - sum(shares.values()), 3))
    out["time_shares"] = shares
    out["env_steps_per_s"] = round(totals["env_steps"] / whole)
    # episodes ended by a diverged simulation (left out of training), per million env steps of the arm's runs
    out["diverged_per_million"] = round(1e6 * totals["diverged"] / max(totals["env_steps"], 1), 2)
    out["clock_s"] = [round(clock_s(rows), 1) for rows in runs]
    return out


def _thresholds(folders: Sequence[str], given: Optional[Sequence[float]], measure: str = RETURN_MEAN) -> List[float]:
    """The study's thresholds, else the run's task's: solve_thresholds for the return, solve_measures.NAME else."""
    if given:
        return [float(t) for t in given]
    from omegaconf import OmegaConf

    config = OmegaConf.load(os.path.join(folders[0], "config.yaml"))
    key = "task.solve_thresholds" if measure == RETURN_MEAN else f"task.solve_measures.{measure}"
    return [float(t) for t in (OmegaConf.select(config, key) or [])]


def machine() -> Dict[str, Any]:
    """What the figures were measured on: CPU model and vector extensions, usable cores, torch and mujoco."""
    import platform

    info: Dict[str, Any] = {"python": platform.python_version(), "cores": len(os.sched_getaffinity(0))
                            if hasattr(os, "sched_getaffinity") else os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        info["cpu"] = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "")
        flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
        info["vector"] = sorted(f for f in set(flags) if f in ("avx2", "avx512f", "avx512_bf16", "amx_tile"))
    except OSError:
        info["cpu"] = platform.processor()
    for module in ("torch", "mujoco"):
        try:
            info[module] = __import__(module).__version__
        except ImportError:
            pass
    return info


def machine_label(info: Optional[Dict[str, Any]]) -> str:
    """A machine kind as the clock sees it: CPU model, vector extensions, cores (what sets seconds per step)."""
    if not info:
        return "(not recorded)"
    return f"{info.get('cpu') or '?'}, {'+'.join(info.get('vector') or []) or 'no AVX2'}, {info.get('cores', '?')} cores"


def commands(study: Dict[str, Any]) -> str:
    """How to rerun one arm: through the study, or as the plain isaac-ppo-train command of one seed."""
    lines = ["| arm | rerun it in the study | one seed by hand |", "|---|---|---|"]
    for arm, overrides in study["arms"].items():
        plain = " ".join(study["common"] + overrides + [f"seed={study['seeds'][0]}"])
        lines.append(f"| {arm} | `isaac-ppo-study run {study['name']} arms={arm}` | `isaac-ppo-train {plain}` |")
    return "\n".join(lines) + "\n"


def write(runs: Dict[str, List[str]], study: Dict[str, Any], out: str, machines: Sequence[Dict[str, Any]] = (),
          ended_otherwise: Sequence[str] = (), machine_of: Optional[Dict[str, Dict[str, Any]]] = None,
          copies: bool = True) -> List[str]:
    """study.json, study.md, the two figures and, with copies, metrics.tar.xz (each run's rows, thinned to
    MAX_PLAIN_ROWS, as the member <arm>_seed_<s>.jsonl: isaac_ppo.lab.archive's pack) under out; the paths written.
    A study with an archive keeps its runs' rows there: its report writes no copies (no run row kept twice).
    machines: the distinct machines the runs ran on (as machine() described each); ended_otherwise: a line for
    each run that ended before its budget or the study's stop rule (it stopped itself); machine_of: run folder ->
    its machine. When the runs ran on more than one machine kind (machine_label), the seconds in the main table
    pool them, so study.md adds the table once per kind over that kind's runs: seconds compare only there."""
    os.makedirs(out, exist_ok=True)
    measure = study.get("measure") or RETURN_MEAN
    thresholds = _thresholds(next(iter(runs.values())), study.get("thresholds"), measure)
    marks = [float(m) for m in study.get("marks_min") or []]
    rows = {f: read_rows(os.path.join(f, "metrics.jsonl")) for folders in runs.values() for f in folders}  # (once)
    summary = {arm: summarise_arm([rows[f] for f in folders], thresholds, marks, measure)
               for arm, folders in runs.items()}
    kinds: Dict[str, Dict[str, List[str]]] = {}  # machine kind -> arm -> its runs there
    for arm, folders in runs.items():
        for folder in folders:
            kinds.setdefault(machine_label((machine_of or {}).get(folder)), {}).setdefault(arm, []).append(folder)
    per_kind = {kind: {arm: summarise_arm([rows[f] for f in folders], thresholds, marks, measure)
                       for arm, folders in arms.items()}
                for kind, arms in sorted(kinds.items())} if len(kinds) > 1 else {}
    written = []
    if copies:
        from isaac_ppo.lab import archive

        packed: Dict[str, bytes] = {}
        for arm, folders in runs.items():
            for folder in folders:
                mine = rows[folder]
                packed[f"{arm}_{os.path.basename(folder)}.jsonl"] = "".join(
                    json.dumps({k: row[k] for k in KEPT if k in row}) + "\n"
                    for row in thinned(mine, max(1, -(-len(mine) // MAX_PLAIN_ROWS)))).encode()
        archive.write(os.path.join(out, "metrics.tar.xz"), packed)
        written.append(os.path.join(out, "metrics.tar.xz"))
    result = {"study": study["name"], "definition": study["source"], "machines": list(machines), "measure": measure,
              "thresholds": thresholds,
              "marks_min": marks, "ended_otherwise": list(ended_otherwise),
              "arms": {arm: {"overrides": study["arms"][arm], **values} for arm, values in summary.items()},
              "by_machine": per_kind}
    with open(os.path.join(out, "study.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(out, "study.md"), "w") as f:
        ran_on = "\n".join(f"- {json.dumps(m)}" for m in machines) or "- (not recorded)"
        f.write(f"# Study {study['name']} ({study['source']})\n\nThe runs ran on:\n{ran_on}\n\n")
        if ended_otherwise:  # (their thresholds not reached count as such; a mark past their end has no value)
            f.write("Runs that ended early:\n" + "".join(f"- {line}\n" for line in ended_otherwise) + "\n")
        if per_kind:
            f.write(f"The runs ran on {len(per_kind)} machine kinds: the seconds below pool them (compare seconds "
                    f"between arms in the per-machine tables after it); returns at env steps pool across kinds.\n\n")
        f.write(markdown(summary, thresholds, marks, measure) + "\n")
        for kind, kind_summary in per_kind.items():
            f.write(f"On {kind} only:\n\n" + markdown(kind_summary, thresholds, marks, measure) + "\n")
        f.write(commands(study))
    print(markdown(summary, thresholds, marks, measure))
    return [os.path.join(out, "study.json"), os.path.join(out, "study.md")] + plot(runs, rows, thresholds, out, measure) + written


def markdown(summary: Dict[str, Dict[str, Any]], thresholds: Sequence[float], marks: Sequence[float],
             measure: str = RETURN_MEAN) -> str:
    headers, named = ["arm", "runs"], "" if measure == RETURN_MEAN else f"{measure} "
    for t in thresholds:
        headers += [f"to {named}{t:g}: reached", f"to {named}{t:g}: median s (95% CI)"]
    headers += [f"eval{' ' + measure if named else ''} at {m:g} min (median)" for m in marks] + ["collect / update / eval / rest", "env steps/s",
                                                                  "diverged / M steps", "clock per run, s (median)"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for arm, s in summary.items():
        cells = [arm, str(s["runs"])]
        for t in thresholds:
            key = f"to_{t:g}"
            low, high = s[f"{key}_ci95_s"]
            cells += [s[f"{key}_reached"], f"{_s(s[f'{key}_median_s'])} ({_s(low)} to {_s(high)})"]
        cells += [_s(s[f"eval_at_{m:g}min_median"]) for m in marks]
        shares = s["time_shares"]
        cells += [" / ".join(f"{100 * shares[k]:.0f}%" for k in ("collect", "update", "evaluation", "rest")),
                  f"{s['env_steps_per_s']:,}", f"{s['diverged_per_million']:g}",
                  f"{statistics.median(s['clock_s']):g}" if s["clock_s"] else ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _s(value: Optional[float]) -> str:
    return "not reached" if value is None else f"{value:g}"


def plot(runs: Dict[str, List[str]], rows: Dict[str, List[Dict[str, Any]]], thresholds: Sequence[float],
         out: str, measure: str = RETURN_MEAN) -> List[str]:
    """eval_vs_seconds.png and eval_vs_env_steps.png (the measure's): every seed thin, the arm's median bold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    points_of = {f: evaluations(rows[f], measure) for f in rows}
    if not any(points_of.values()):
        return paths  # (no run evaluated: nothing to draw)
    for axis, name, label in ((0, "eval_vs_seconds.png", "clock, evaluation included (s, log scale)"),
                              (1, "eval_vs_env_steps.png", "env steps")):
        figure, axes = plt.subplots(figsize=(8, 5))
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for (arm, folders), color in zip(runs.items(), colors * 4):
            curves = [[(p[axis], p[2]) for p in points_of[f]] for f in folders]
            # where each run ended: past it, a run that stopped early has no evaluation to hold
            ends = [clock_s(rows[f]) if axis == 0 else (rows[f][-1].get("env_steps", 0) if rows[f] else 0)
                    for f in folders]
            for points in curves:
                axes.plot([x for x, _ in points], [r for _, r in points], color=color, alpha=0.3, linewidth=0.8)
            grid = sorted({x for points in curves for x, _ in points})
            median = []
            for x in grid:  # the median over the runs still running at x of each one's latest evaluation,
                # once every one of them has one
                latest = [[r for px, r in points if px <= x] for points, end in zip(curves, ends) if end >= x]
                if latest and all(latest):
                    median.append((x, statistics.median(values[-1] for values in latest)))
            axes.plot([x for x, _ in median], [r for _, r in median], color=color, linewidth=2.2,
                      label=f"{arm} (median of {len(curves)} seeds)")
        for threshold in thresholds:
            axes.axhline(threshold, color="grey", linestyle=":", linewidth=0.8)
        if axis == 0:
            axes.set_xscale("log")
        axes.set_xlabel(label)
        axes.set_ylabel(f"evaluation {measure_name(measure)} (mean action)")
        axes.legend(loc="lower right")
        figure.tight_layout()
        path = os.path.join(out, name)
        figure.savefig(path, dpi=110)
        plt.close(figure)
        paths.append(path)
    return paths
