"""Issue 90: each way of learning from a one-update-stale batch (cfg/study/concurrent_fix_ant.yaml's arms) against
issue 48's synchronous arm base_1024x64 (the same settings, archived in
benchmarks/studies/paper_claims/ant_runs.tar.xz), at matched env steps: the final evaluation and the area under the
evaluation curve, non-inferiority at a 10% margin (the study's own comparison code, isaac_ppo/lab/report/compare.py),
and what the update saw (the lag's KL, the share of the batch outside the clip before the update, the update's own
KL and clip fraction, the value loss, the advantages' spread), first and last 10 iterations.

    python benchmarks/concurrent_fix.py                 (the study's archived runs: studies/concurrent_fix/)
    python benchmarks/concurrent_fix.py RUNS_FOLDER     (<runs_dir>/study/concurrent_fix_ant/runs)
"""
import argparse
import glob
import json
import os
import tarfile
import tempfile

from isaac_ppo.lab.report.compare import compare

ARCHIVE = os.path.join(os.path.dirname(__file__), "studies", "paper_claims", "ant_runs.tar.xz")
FIX_RUNS = os.path.join(os.path.dirname(__file__), "studies", "concurrent_fix", "ant_runs.tar.xz")
TRACE = ("stale_kl", "stale_clip_fraction", "kl", "clip_fraction", "critic_loss", "advantage_std")


def runs_of(folder: str) -> list:
    return sorted(d for d in glob.glob(os.path.join(folder, "seed_*")) if os.path.isfile(os.path.join(d, "metrics.jsonl")))


def mean(rows: list, key: str) -> str:
    values = [r[key] for r in rows if r.get(key) is not None]
    return f"{sum(values) / len(values):.3f}" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", default=None,
                        help="the fix study's runs folder (default: its archive, " + FIX_RUNS + ")")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(ARCHIVE) as pack:
            pack.extractall(tmp)
        if args.runs is None:
            args.runs = os.path.join(tmp, "fix")
            with tarfile.open(FIX_RUNS) as pack:
                pack.extractall(args.runs)
        runs = {"sync_base": runs_of(os.path.join(tmp, "base_1024x64")),
                "issue48_concurrent": runs_of(os.path.join(tmp, "concurrent_1024x64"))}
        for arm in sorted(os.listdir(args.runs)):
            runs[arm] = [d for d in runs_of(os.path.join(args.runs, arm))
                         if os.path.isfile(os.path.join(d, "metrics.json"))]  # finished runs only
        print("| arm | seeds | final evaluation per seed | " + " | ".join(TRACE) + " (first 10 / last 10 iterations) |")
        print("|---|---|---|" + "---|" * len(TRACE))
        for arm, folders in runs.items():
            finals, traces = [], {key: [] for key in TRACE}
            for folder in folders:
                rows = [json.loads(line) for line in open(os.path.join(folder, "metrics.jsonl"))]
                finals.append(round([r for r in rows if "eval" in r][-1]["eval"]["return_mean"]))
                for key in TRACE:
                    traces[key].append(f"{mean(rows[:10], key)} / {mean(rows[-10:], key)}")
            shown = " | ".join("; ".join(traces[key]) for key in TRACE)
            print(f"| {arm} | {len(folders)} | {', '.join(map(str, finals))} | {shown} |")
        print()
        for arm in runs:
            if arm == "sync_base":
                continue
            for metric in ("final", "auc"):
                c = compare(runs, {"a": arm, "b": "sync_base", "metric": metric, "kind": "noninferior", "margin": 0.1})
                ci = c.get("ci95")
                shown = f"{c['mean_a']:.0f} vs {c['mean_b']:.0f}, difference {c['difference']:+.0f} (95% CI " \
                        f"{ci[0]:+.0f} to {ci[1]:+.0f})" if ci else ""
                print(f"{arm} vs sync_base, {metric}: {shown} -> {c['verdict']}")


if __name__ == "__main__":
    main()
