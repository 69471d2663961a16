"""A study's comparisons between arms, each a claim with an expected direction, and its verdict; and how well a
diagnostic measured early predicts the return at the end.

The numbers compared are the ones that mean what they say: the evaluation at matched env steps (the evaluations
every run made at the same env-step counts: its final one, at the end of the common budget, and the area under the
curve, the mean over the evaluations every run of both arms made), or a diagnostic (its mean over the run's
measurements, on the study's common probe set when it gives one). The evaluation is the study's `measure`: its mean
return (return_mean, the default) or a measure of success the task declares (FrankaCabinet's drawer_opened). Per comparison: each arm's
mean over seeds, the difference a - b with its 95% percentile-bootstrap CI (seeds resampled within each arm),
and a two-sided permutation test of the difference of means (exact over every relabelling up to 20,000 of them,
else that many random ones). Three kinds of comparison (the study definition's `kind:`), each with its verdict:
- direction (the default; a > b claimed, or a < b): "supported" when the CI excludes 0 on the expected side,
  "contradicted" when it excludes 0 on the other, else "inconclusive at this budget";
- noninferior (a is not worse than b: a claim of no loss, never supported by a CI that merely includes 0): with a
  margin m = `margin` x |mean b|, "supported" when the whole CI is above -m (below +m for expect: less, where lower
  is better), "contradicted" when it is all past -m, else inconclusive;
- equivalent (no difference either way, past the margin): "supported" when the CI lies within (-m, +m),
  "contradicted" when it lies wholly outside it on one side, else inconclusive.
An interaction compares effects, not arms: a: [A_HI, A_LO] and b: [B_HI, B_LO] compare the difference of
differences (A_HI - A_LO) - (B_HI - B_LO) (does an effect change with the env count?), its CI from resampling each
of the four arms' seeds within the arm, its p two-sided from that bootstrap (no relabelling of four arms is exact
under this null), and a margin's scale the mean |mean| of the four arms. numpy only.

Prediction: Spearman's rank correlation between a diagnostic's value at a fraction of the budget (the last
measurement at or before it) and the run's final evaluation (of the measure), over every run of the listed arms, with a
permutation p-value. `adaptive_stress` is the adaptive scheduler's own signal: the share of the run's iterations up
to that fraction at which its rule, replayed on the run's rows, would have moved to more envs (report/audit.py).
"""
from __future__ import annotations

import itertools
import json
import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from isaac_ppo.lab.report.audit import ADAPTIVE_STRESS, stress_share
from isaac_ppo.lab.report.claim_curves import plot_claim_curves
from isaac_ppo.lab.report.clock import eval_curve, measure_name
from isaac_ppo.lab.watch import RETURN_MEAN, read_rows

EXPECT = ("greater", "less")
KINDS = ("direction", "noninferior", "equivalent")


def final_return(folder: str, measure: str = RETURN_MEAN) -> Optional[float]:
    """The run's end-of-run evaluation (metrics.json final_eval) of the measure (its return unless told), else its
    last periodic one."""
    path = os.path.join(folder, "metrics.json")
    if os.path.isfile(path):
        with open(path) as f:
            final = (json.load(f) or {}).get("final_eval")
        if isinstance(final, dict) and isinstance(final.get(measure), (int, float)):
            return float(final[measure])
    evals = eval_curve(read_rows(os.path.join(folder, "metrics.jsonl")), measure)
    return evals[max(evals)] if evals else None


def run_values(folders: Sequence[str], metric: str, grid: Sequence[int],
               final: Callable[[str, str], Optional[float]] = final_return,
               measure: str = RETURN_MEAN) -> List[float]:
    """One value per run: final (the final evaluation of the measure, as `final` reads it), auc (its mean over
    the matched grid), or a diagnostic's mean over the run's measurements (diagnostics.NAME)."""
    values = []
    for folder in folders:
        rows = read_rows(os.path.join(folder, "metrics.jsonl"))
        if metric == "final":
            value = final(folder, measure)
        elif metric == "auc":
            curve = eval_curve(rows, measure)
            value = float(np.mean([curve[s] for s in grid])) if grid else None
        else:
            name = metric.split(".", 1)[1]
            seen = [row["diagnostics"][name] for row in rows if isinstance(row.get("diagnostics"), dict)
                    and isinstance(row["diagnostics"].get(name), (int, float))]
            value = float(np.mean(seen)) if seen else None
        if value is not None and math.isfinite(value):
            values.append(value)
    return values


def matched_grid(folders: Sequence[str], measure: str = RETURN_MEAN) -> List[int]:
    """The env-step counts at which every run evaluated (the measure)."""
    steps = None
    for folder in folders:
        mine = set(eval_curve(read_rows(os.path.join(folder, "metrics.jsonl")), measure))
        steps = mine if steps is None else steps & mine
    return sorted(steps or [])


def bootstrap_difference_ci(a: Sequence[float], b: Sequence[float], reps: int = 10000,
                            seed: int = 0) -> Tuple[float, float]:
    """95% percentile-bootstrap CI of mean(a) - mean(b), each arm's seeds resampled within the arm."""
    rng = np.random.default_rng(seed)
    diffs = resampled_means(a, rng, reps) - resampled_means(b, rng, reps)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(low), float(high)


def resampled_means(arm: Sequence[float], rng: np.random.Generator, reps: int) -> np.ndarray:
    """reps bootstrap means of one arm's values (its seeds drawn with replacement)."""
    x = np.asarray(arm, dtype=np.float64)
    return x[rng.integers(0, len(x), (reps, len(x)))].mean(1)


def permutation_p(a: Sequence[float], b: Sequence[float], limit: int = 20000, seed: int = 0) -> float:
    """Two-sided p-value of mean(a) - mean(b) under relabelling of the pooled values."""
    pooled = np.asarray(list(a) + list(b), dtype=np.float64)
    n, observed = len(a), abs(float(np.mean(a) - np.mean(b)))
    total = math.comb(len(pooled), n)
    exact = total <= limit
    if exact:
        splits = (list(c) for c in itertools.combinations(range(len(pooled)), n))
    else:
        rng = np.random.default_rng(seed)
        splits = (list(rng.permutation(len(pooled))[:n]) for _ in range(limit))
    count = hits = 0
    for chosen in splits:
        mask = np.zeros(len(pooled), dtype=bool)
        mask[chosen] = True
        count += 1
        hits += abs(pooled[mask].mean() - pooled[~mask].mean()) >= observed - 1e-12
    return hits / count if exact else sampled_p(hits, count)  # exact: the observed labelling is among those counted


def sampled_p(hits: int, draws: int) -> float:
    """A permutation p-value from `draws` random permutations, `hits` of them as extreme as the observed one: the
    observed order counts as one more, so the p-value is never 0 (Phipson & Smyth 2010)."""
    return (hits + 1) / (draws + 1)


def verdict(low: float, high: float, expect: str, kind: str = "direction", margin: float = 0.0) -> str:
    """The comparison's verdict from the CI of a - b (module docstring); margin in the difference's own units."""
    if kind == "noninferior":  # (flipped so that "worse" is always the negative side)
        low, high = (low, high) if expect == "greater" else (-high, -low)
        if low > -margin:
            return "supported"
        return "contradicted" if high < -margin else "inconclusive at this budget"
    if kind == "equivalent":
        if -margin < low and high < margin:
            return "supported"
        return "contradicted" if low >= margin or high <= -margin else "inconclusive at this budget"
    if low > 0 or high < 0:
        return "supported" if (low > 0) == (expect == "greater") else "contradicted"
    return "inconclusive at this budget"


def bootstrap_interaction(values: Sequence[Sequence[float]], reps: int = 10000,
                          seed: int = 0) -> Tuple[float, float, float]:
    """(low, high, p) of (A_HI - A_LO) - (B_HI - B_LO) for values = [A_HI, A_LO, B_HI, B_LO]: the 95% percentile CI
    with each arm's seeds resampled within the arm, and the two-sided bootstrap p (twice the smaller share of
    resampled differences on either side of 0, at most 1)."""
    rng = np.random.default_rng(seed)
    means = [resampled_means(arm, rng, reps) for arm in values]
    diffs = (means[0] - means[1]) - (means[2] - means[3])
    low, high = np.percentile(diffs, [2.5, 97.5])
    p = min(1.0, 2.0 * min(float(np.mean(diffs <= 0)), float(np.mean(diffs >= 0))))
    return float(low), float(high), p


def arm_names(side: Any) -> List[str]:
    """A comparison's side: one arm, or [HI, LO] for an interaction."""
    return list(side) if isinstance(side, (list, tuple)) else [side]


AUC_SUFFIX = " (AUC)"  # a claim's second line on the area under the curve ("4 (AUC)"): the same arms as "4"


def claim_arms(comparisons: Sequence[Dict[str, Any]]) -> Dict[str, List[str]]:
    """Each claim -> the arms its comparisons name (an interaction's four included), in the order first named; a
    claim's AUC line is folded into the claim it repeats."""
    arms: Dict[str, List[str]] = {}
    for c in comparisons:
        claim = c["claim"][:-len(AUC_SUFFIX)] if c["claim"].endswith(AUC_SUFFIX) else c["claim"]
        named = arms.setdefault(claim, [])
        named += [arm for arm in arm_names(c["a"]) + arm_names(c["b"]) if arm not in named]
    return arms


def label(side: Any) -> str:
    names = arm_names(side)
    return names[0] if len(names) == 1 else f"({names[0]} - {names[1]})"


def compare(runs: Dict[str, List[str]], spec: Dict[str, Any], flagged: Optional[Dict[str, str]] = None,
            final: Callable[[str, str], Optional[float]] = final_return,
            measure: str = RETURN_MEAN) -> Dict[str, Any]:
    """One comparison of the study definition's `compare` list: {claim, a, b, metric, expect}. flagged (run
    folder -> its name) are the runs past the gait check's flag: they stay in (dropping a run after seeing it
    biases the comparison), and the comparison names those of its arms' runs. final: how a run's final
    evaluation is read (report/retest.py reads a second one); measure: the evaluation's key compared."""
    a, b, metric, expect = spec["a"], spec["b"], spec.get("metric", "final"), spec.get("expect", "greater")
    kind, fraction = spec.get("kind", "direction"), float(spec.get("margin", 0.0))
    flagged = flagged or {}
    arms = arm_names(a) + arm_names(b)
    folders = [f for arm in arms for f in runs.get(arm, [])]
    grid = matched_grid(folders, measure) if metric == "auc" else []
    values = [run_values(runs.get(arm, []), metric, grid, final, measure) for arm in arms]
    out = {"claim": str(spec.get("claim", "")), "a": a, "b": b, "metric": metric, "expect": expect, "kind": kind,
           "runs": [len(v) for v in values], "gait_flagged": [flagged[f] for f in folders if f in flagged]}
    if kind != "direction":
        out["margin"] = fraction
    if min(len(v) for v in values) < 2:
        counts = " and ".join(str(len(v)) for v in values)
        return dict(out, verdict=f"not tested: {counts} runs (needs 2 per arm)")
    means = [float(np.mean(v)) for v in values]
    if len(arms) == 4:  # an interaction: (A_HI - A_LO) - (B_HI - B_LO)
        low, high, p = bootstrap_interaction(values)
        difference, scale = (means[0] - means[1]) - (means[2] - means[3]), float(np.mean(np.abs(means)))
        tested = dict(mean_a=means[0] - means[1], mean_b=means[2] - means[3], p_bootstrap=p)
    else:
        low, high = bootstrap_difference_ci(values[0], values[1])
        difference, scale = means[0] - means[1], abs(means[1])
        tested = dict(mean_a=means[0], mean_b=means[1], p_permutation=permutation_p(values[0], values[1]))
    return dict(out, **tested, difference=difference, ci95=[low, high], scale=scale,
                matched_points=len(grid) if grid else None,
                verdict=verdict(low, high, expect, kind, fraction * scale))


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks with ties averaged (as scipy.stats.rankdata's default)."""
    x = np.asarray(values, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    for value in np.unique(x):
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def signal_at(rows: Sequence[Dict[str, Any]], name: str, cut: float) -> Optional[float]:
    """A diagnostic's last measurement at or before `cut` env steps; for adaptive_stress, the adaptive scheduler's
    rule replayed on the rows up to it (isaac_ppo.lab.report.audit)."""
    if name == ADAPTIVE_STRESS:
        return stress_share(rows, cut)
    seen = [row["diagnostics"][name] for row in rows if row.get("env_steps", 0) <= cut
            and isinstance(row.get("diagnostics"), dict) and isinstance(row["diagnostics"].get(name), (int, float))]
    return float(seen[-1]) if seen else None


def predict(runs: Dict[str, List[str]], spec: Dict[str, Any], reps: int = 10000, seed: int = 0,
            measure: str = RETURN_MEAN) -> List[Dict[str, Any]]:
    """Spearman between each diagnostic at `at_fraction` of the run and its final evaluation of the measure (its
    return unless told), over `arms`."""
    folders = [f for arm in spec.get("arms", list(runs)) for f in runs.get(arm, [])]
    fraction = float(spec.get("at_fraction", 0.3))
    runs = [(read_rows(os.path.join(folder, "metrics.jsonl")), final_return(folder, measure)) for folder in folders]
    runs = [(rows, final) for rows, final in runs if rows and final is not None]
    out = []
    for name in spec.get("diagnostics", []):
        xs, ys = [], []
        for rows, final in runs:
            value = signal_at(rows, name, fraction * rows[-1].get("env_steps", 0))
            if value is not None:
                xs.append(value)
                ys.append(final)
        # how many different values the runs gave: a Spearman over a signal nearly every run shares ranks by its
        # few exceptions (or by a grouping of the runs), which the correlation alone does not show
        row = {"diagnostic": name, "at_fraction": fraction, "runs": len(xs), "distinct": len(set(xs)),
               "spearman": None, "p_permutation": None}
        if len(xs) < 3:
            row["note"] = f"{len(xs)} runs measured it (needs 3)"
        elif row["distinct"] == 1:  # no ranking to correlate (e.g. no dormant unit in any run): said, not a NaN
            row["note"] = f"the same in every run ({xs[0]:g}): it ranks nothing"
        else:
            rho = spearman(xs, ys)
            rng = np.random.default_rng(seed)
            null = [spearman(xs, list(rng.permutation(ys))) for _ in range(reps)]
            hits = sum(abs(r) >= abs(rho) - 1e-12 for r in null)
            row.update(spearman=rho, p_permutation=sampled_p(hits, reps))
        out.append(row)
    holm([row for row in out if row["p_permutation"] is not None])
    return out


def format_p(p: float) -> str:
    """A p-value for a table: three decimals, or its two significant digits below 0.001 (never a bare 0.000)."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def holm(rows: List[Dict[str, Any]]) -> None:
    """Each row's p_holm: its p_permutation adjusted by Holm's step-down over the rows tested together, so that
    choosing the best of several signals on one data set still means p < 0.05 (PROTOCOL amendment 8)."""
    order = sorted(range(len(rows)), key=lambda i: rows[i]["p_permutation"])
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(rows) - rank) * rows[i]["p_permutation"]))
        rows[i]["p_holm"] = running


def claims_table(claims: Dict[str, Any], comparisons: Sequence[Dict[str, Any]]) -> str:
    """One line per claim of the study definition's `claims` ({id: text} or {id: {text, not_tested}}): its
    comparisons' verdicts and one verdict for the claim: supported when every comparison is, contradicted when
    any is and none supports it, mixed when both happen, else inconclusive at this budget; or not tested, with
    the reason the definition gives; not tested yet while none of its comparisons has two runs per arm."""
    lines = ["| claim | what it says | comparisons (verdicts) | verdict |", "|---|---|---|---|"]
    for claim_id, entry in claims.items():
        entry = entry if isinstance(entry, dict) else {"text": entry}
        mine = [c for c in comparisons if c["claim"] == str(claim_id)]
        verdicts = [c["verdict"] for c in mine]
        if entry.get("not_tested") or not mine:
            overall = f"not tested in this study: {entry.get('not_tested') or 'no comparison listed'}"
        elif all(v.startswith("not tested") for v in verdicts):  # (a study still running: too few runs yet)
            overall = "not tested yet: too few runs"
        elif all(v == "supported" for v in verdicts):
            overall = "supported"
        elif "supported" in verdicts and "contradicted" in verdicts:
            overall = "mixed"
        elif "contradicted" in verdicts and "supported" not in verdicts:
            overall = "contradicted"
        else:
            overall = "inconclusive at this budget"
        listed = "; ".join(f"{label(c['a'])} vs {label(c['b'])} on {c['metric']}{_kind_note(c)}: {c['verdict']}"
                           + _flagged_note(c) for c in mine)
        lines.append(f"| {claim_id} | {entry.get('text', '')} | {listed} | {overall} |")
    return "\n".join(lines) + "\n"


def _kind_note(c: Dict[str, Any]) -> str:
    kind = c.get("kind", "direction")
    return "" if kind == "direction" else f" ({kind}, margin {100 * c['margin']:g}%)"


def _flagged_note(c: Dict[str, Any]) -> str:
    return f" (with gait-flagged {', '.join(c['gait_flagged'])})" if c.get("gait_flagged") else ""


def toward_claim(c: Dict[str, Any]) -> Tuple[float, float, float]:
    """A comparison's difference and CI in percent of |mean b|, signed so that positive is the claimed direction
    (a > b for "greater", a < b for "less"): every claim reads the same way on one axis, whatever its metric."""
    scale = c.get("scale", abs(c["mean_b"])) or 1.0
    sign = 1.0 if c["expect"] == "greater" else -1.0
    low, high = sorted(sign * 100.0 * v / scale for v in c["ci95"])
    return sign * 100.0 * c["difference"] / scale, low, high


VERDICT_COLOURS = {"supported": "tab:green", "contradicted": "tab:red"}  # (else grey: inconclusive)


def plot(comparisons: Sequence[Dict[str, Any]], path: str) -> Optional[str]:
    """compare.png: each tested comparison's difference with its 95% CI, toward_claim's axis (percent of arm b,
    positive = as the claim says), coloured by verdict; None when nothing was tested."""
    tested = [c for c in comparisons if "difference" in c]
    if not tested:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 0.42 * len(tested) + 1.4))
    for y, c in enumerate(reversed(tested)):
        middle, low, high = toward_claim(c)
        colour = VERDICT_COLOURS.get(c["verdict"], "grey")
        axes.plot([low, high], [y, y], color=colour, linewidth=2.5)
        axes.plot([middle], [y], "o", color=colour)
    axes.set_yticks(range(len(tested)))
    axes.set_yticklabels([f"{c['claim']}: {label(c['a'])} vs {label(c['b'])} ({c['metric']})" for c in reversed(tested)],
                         fontsize=7)
    axes.axvline(0.0, color="black", linewidth=0.8)
    axes.set_xlabel("difference a - b, % of b, 95% bootstrap CI\n(right: as the claim says; green supported, "
                    "red contradicted, grey inconclusive)", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110, bbox_inches="tight")  # the long labels stay inside the image
    plt.close(figure)
    return path


def markdown(comparisons: Sequence[Dict[str, Any]], predictions: Sequence[Dict[str, Any]],
             measure: str = RETURN_MEAN) -> str:
    lines = ["| claim | a vs b | metric | expected | mean a | mean b | a - b (95% CI) | p (permutation) | runs | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in comparisons:
        if "difference" in c:
            low, high = c["ci95"]
            # (two arms: the permutation test's p; an interaction: its bootstrap's)
            p = format_p(c["p_permutation"]) if "p_permutation" in c else format_p(c["p_bootstrap"]) + " (bootstrap)"
            cells = [f"{c['mean_a']:.4g}", f"{c['mean_b']:.4g}", f"{c['difference']:+.4g} ({low:+.4g} to {high:+.4g})", p]
        else:
            cells = ["", "", "", ""]
        lines.append(f"| {c['claim']} | {label(c['a'])} vs {label(c['b'])} | {c['metric']} | {_expected(c)} | "
                     + " | ".join(cells) + f" | {' + '.join(map(str, c['runs']))} | {c['verdict']}{_flagged_note(c)} |")
    if predictions:
        lines += ["", "| diagnostic (at a fraction of the budget) | runs | distinct values | Spearman with the final "
                  f"{measure_name(measure)} | p (permutation) | p, Holm over the tested rows |", "|---|---|---|---|---|---|"]
        for p in predictions:
            measured = [p["note"], "", ""] if p["spearman"] is None else [
                f"{p['spearman']:+.3f}", format_p(p['p_permutation']), format_p(p['p_holm'])]
            row = [f"{p['diagnostic']} (at {p['at_fraction']:g})", str(p["runs"]), str(p.get("distinct", ""))] + measured
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _expected(c: Dict[str, Any]) -> str:
    """What the claim says of a - b, in the table's words."""
    kind, side = c.get("kind", "direction"), ">" if c["expect"] == "greater" else "<"
    if kind == "noninferior":
        return f"a not {'<' if side == '>' else '>'} b by {100 * c['margin']:g}%"
    if kind == "equivalent":
        return f"a = b within {100 * c['margin']:g}%"
    return f"a {side} b"


def write(runs: Dict[str, List[str]], study: Dict[str, Any], out: str,
          flagged: Optional[Dict[str, str]] = None) -> List[str]:
    """A study's compare.json, compare.md (the claims table, the figures, each comparison, the predictions),
    compare.png and claim_curves.png under out; the paths written. flagged: the runs past the gait flag (see
    compare)."""
    measure = study.get("measure") or RETURN_MEAN
    comparisons = [compare(runs, spec, flagged, measure=measure) for spec in study["compare"]]
    predictions = predict(runs, study["predict"], measure=measure) if study["predict"] else []
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump({"measure": measure, "comparisons": comparisons, "predictions": predictions}, f, indent=1)
    text = markdown(comparisons, predictions, measure)
    figure = plot(comparisons, os.path.join(out, "compare.png"))
    curves = plot_claim_curves(runs, claim_arms(comparisons), os.path.join(out, "claim_curves.png"), measure)
    if curves:
        text = (f"![each claim's arms: evaluation {measure_name(measure)} against env steps, seeds thin, median "
                "bold](claim_curves.png)\n\n" + text)
    if figure:
        text = "![each comparison's difference with its 95% CI, positive as the claim says](compare.png)\n\n" + text
    if study["claims"]:
        text = claims_table(study["claims"], comparisons) + "\n" + text
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write(text)
    print(text)
    return [os.path.join(out, "compare.json"), os.path.join(out, "compare.md")] + [p for p in (figure, curves) if p]
