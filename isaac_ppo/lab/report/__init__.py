"""isaac-ppo-report, the command: the table and figures of a set of isaac-ppo-train runs (or multiruns).

It gathers the run folders, their status (complete, stopped, crashed or running, empty), groups them by the
swept overrides with seeds pooled, and writes the honest summary of each group: the interquartile mean (IQM)
of the runs' final metric with a 95% stratified bootstrap confidence interval (Agarwal et al. 2021, the
rliable recipe), as a console table, report.md, report.csv, runs.csv and PNG figures.

The package, by concern; imports flow one way, down this list:
  __main__      python -m isaac_ppo.lab.report: the same command
  __init__      the command: parse_args, run_report, main
  tables        console text, report.md, report.csv, runs.csv, number formatting
  figures       the PNG figures (matplotlib)
  groups        grouping runs by swept keys, each group's summary, the Report (gather)
  runs          reading run folders: overrides, config, metrics, status, resumed chains
and, for a study's report (isaac-ppo-study report, lab/study.py):
  retest        the final comparisons again, on a second evaluation of the same policies
  compare       a study's claims between arms, their verdicts (bootstrap CI, permutation test), and how well an
                early diagnostic predicts the final return (Spearman)
  claim_curves  claim_curves.png: a panel per claim, the curves of the arms its comparisons name
  clock         the wall-clock view: time to each threshold, the evaluation at fixed minutes, where the time went
  audit         the adaptive scheduler's rule replayed on runs that did not use it
  placebo       a placebo of a run's collection schedule (the same changes at random iterations)
The IQM and its stratified bootstrap CI are isaac_ppo/stats.py's. The public names of tables, figures, groups,
runs and stats are re-exported here.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from isaac_ppo.errors import UserError
from isaac_ppo.lab.archive import folder_name, is_pack
from isaac_ppo.lab.report.figures import MAX_CURVE_POINTS, common_grid, diagnostic_names, group_curve, write_figures
from isaac_ppo.lab.report.groups import (
    Group,
    Report,
    check_same_keys,
    fill_unset_keys,
    gather,
    group_runs,
    name_groups,
    split_keys,
    summarise_group,
)
from isaac_ppo.lab.report.runs import (
    COMPLETE,
    CRASHED,
    EMPTY,
    NOT_RUNS,
    OUTPUT_KEYS,
    STOPPED,
    Run,
    available_metrics,
    check_metric,
    final_value,
    find_run_dirs,
    load_run,
    metric_series,
    metric_value,
    parse_overrides,
    run_status,
)
from isaac_ppo.stats import BOOTSTRAP_CHUNK_ELEMENTS, iqm, stratified_bootstrap_ci, stratified_resample_indices
from isaac_ppo.lab.report.tables import (
    console_text,
    describe,
    markdown_table,
    markdown_text,
    table_rows,
    text_table,
    write_csvs,
)

__all__ = [
    "PROG", "parse_args", "run_report", "main",
    "console_text", "describe", "markdown_table", "markdown_text", "table_rows", "text_table", "write_csvs",
    "MAX_CURVE_POINTS", "common_grid", "diagnostic_names", "group_curve", "write_figures",
    "Group", "Report", "check_same_keys", "fill_unset_keys", "gather", "group_runs", "name_groups", "split_keys", "summarise_group",
    "BOOTSTRAP_CHUNK_ELEMENTS", "iqm", "stratified_bootstrap_ci", "stratified_resample_indices",
    "COMPLETE", "CRASHED", "EMPTY", "NOT_RUNS", "OUTPUT_KEYS", "STOPPED", "Run", "available_metrics", "check_metric",
    "final_value", "find_run_dirs", "load_run", "metric_series", "metric_value", "parse_overrides", "run_status",
]


PROG = "isaac-ppo-report"


USAGE = f"""usage: {PROG} DIR [DIR ...] [metric=KEY] [out=DIR] [reps=N] [seed=N]

Summarise isaac-ppo-train runs (single runs or multirun folders, searched recursively): per group of swept
overrides (seeds pooled), the IQM of the final metric with a 95% stratified bootstrap CI; writes report.md,
report.csv, runs.csv and figures.

  metric=KEY  a key of metrics.jsonl rows, or diagnostics.NAME or eval.NAME (default: eval.return_mean when the
              runs evaluated, else window_mean_return)
  out=DIR     output folder (default: <first DIR>/report)
  reps=N      bootstrap resamples (default: 2000)
  seed=N      seed of the bootstrap (default: 0)
The flag forms --metric KEY, --out DIR, --reps N, --seed N are the same keys."""


def own_keys() -> Dict[str, Any]:
    """The report's own keys and their domains (lab/args.py checks them before anything is read or written)."""
    from isaac_ppo.domains import integer
    from isaac_ppo.lab import args

    return {"metric": args.text("a key of metrics.jsonl rows, diagnostics.NAME or eval.NAME"), "out": args.folder(),
            "reps": args.number(integer(1)), "seed": args.number(integer(0))}  # (seed: NumPy's, never negative)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The report's folders and keys (lab/args.py: KEY=VALUE words, as every lab command); a mistake is a
    UserError naming the word."""
    from isaac_ppo.lab.args import parse

    words = parse(argv, own_keys(), f"usage: {PROG} DIR [DIR ...] [metric=KEY] [out=DIR] [reps=N] [seed=N]",
                  positional=True)
    if not words.positional:
        raise UserError(f"no run folder given: {PROG} DIR [DIR ...] (see --help)")
    return argparse.Namespace(dirs=words.positional, metric=words.own.get("metric"), out=words.own.get("out"),
                              reps=words.own.get("reps", 2000), seed=words.own.get("seed", 0))


def run_report(args: argparse.Namespace, names: Optional[Dict[str, str]] = None) -> List[str]:
    """Gather, print and write the report; the paths written. `names` (run folder -> name) labels the groups
    whose runs share one name by it (a study's arms) instead of by their overrides."""
    out = args.out
    if out is None:  # beside a packed archive (isaac_ppo.lab.archive) rather than inside it: NAME_report
        out = folder_name(args.dirs[0]) + "_report" if is_pack(args.dirs[0]) else os.path.join(args.dirs[0], "report")
    report = gather(args.dirs, args.metric, args.reps, args.seed, skip=[out])
    if names:
        name_groups(report.groups, names)
    if args.out is None:  # the default out, checked as a given out= is (writable) before it is made
        own_keys()["out"].value("out", out)
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
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(word in ("-h", "--help") for word in argv):
        print(USAGE)
        return 0
    try:
        run_report(parse_args(argv))
    except UserError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        raise SystemExit(2)
    return 0
