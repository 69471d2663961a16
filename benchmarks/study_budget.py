"""A study's env-step budget from its arms' measured iteration times (the rule of paper_ant's and paper_claims'
protocols): each arm timed with `isaac-ppo-bench train` at the study's own settings (its `common` and the arm's
overrides, the budget and evaluation keys left out: bench times iterations without the evaluations due in them), then
the largest number k of evaluation intervals I such that every arm's seeds fit the hours given:

    seeds x sum over arms (k x I x seconds per env step of the arm + k x seconds per evaluation) <= hours x 3600

    python benchmarks/study_budget.py STUDY --hours H --eval-s S [--iterations 8] [--arms a,b] [--out LOG.jsonl]

--eval-s: the seconds one evaluation takes (from a pilot's rows: eval.seconds). Run it on the machine alone: the
figures are its clock. One JSON line per arm (bench's own line plus the arm and its batch), then the budget.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from isaac_ppo.lab.study_definition import load_study

LEFT_OUT = ("max_env_steps=", "max_iterations=", "eval.interval_env_steps=", "save_interval_iterations=")


def time_arm(overrides: list, iterations: int) -> dict:
    done = subprocess.run([sys.executable, "-m", "isaac_ppo.lab.bench", "train", f"iterations={iterations}",
                           *[w for w in overrides if not w.startswith(LEFT_OUT)]],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"study_budget: bench failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def budget(arms: dict, seeds: int, hours: float, interval: int, eval_s: float) -> dict:
    """k evaluation intervals a run; arms: name -> bench line (iteration_s, num_envs, rollout_length)."""
    per_interval = sum(interval * line["iteration_s"] / (line["num_envs"] * line["rollout_length"]) + eval_s
                       for line in arms.values())
    k = int(hours * 3600 // (seeds * per_interval))
    return {"evaluations": k, "env_steps": k * interval, "hours": round(seeds * k * per_interval / 3600, 2),
            "seconds_per_interval_all_arms": round(per_interval, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study")
    parser.add_argument("--hours", type=float, required=True)
    parser.add_argument("--eval-s", type=float, required=True)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--arms", help="a subset, comma separated (the budget then covers only those)")
    parser.add_argument("--out", help="also append the lines to this JSONL log")
    args = parser.parse_args()
    study = load_study(args.study)
    interval = int(next(w.split("=", 1)[1] for w in study["common"] if w.startswith("eval.interval_env_steps=")))
    names = args.arms.split(",") if args.arms else list(study["arms"])
    lines = {}
    for name in names:
        line = time_arm(study["common"] + study["arms"][name], args.iterations)
        lines[name] = dict(line, arm=name, batch=line["num_envs"] * line["rollout_length"])
        emit(lines[name], args.out)
    emit(dict(budget(lines, len(study["seeds"]), args.hours, interval, args.eval_s), study=study["name"],
              arms=len(lines), seeds=len(study["seeds"]), evaluation_interval=interval, eval_s=args.eval_s),
         args.out)


def emit(line: dict, out: str) -> None:
    text = json.dumps(line)
    print(text, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
