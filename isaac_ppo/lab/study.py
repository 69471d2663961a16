"""isaac-ppo-study: a study (arms x seeds of isaac-ppo-train) run into one folder, resumable, and its report.

Why a command of its own: a comparison worth reporting needs many seeds of many arms, longer than one session or one
machine; each run is a real isaac-ppo-train in a folder of its own, a finished run is archived (a pack carried in
git), and the report reads the archive first, so the same command continues the study anywhere. HELP is --help.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from isaac_ppo.domains import integer
from isaac_ppo.errors import UserError
from isaac_ppo.lab import args as lab_args
from isaac_ppo.lab.args import key_of as _key
from isaac_ppo.lab.args import parse, run_command
from isaac_ppo.lab.study_definition import (DONE, archive_run, archived_folder, finished_folder, load_study,
                                            run_folder, study_root)
from isaac_ppo.lab.watch import RETURN_MEAN, Progress, die_with_parent, read_rows, train_command
from isaac_ppo.loop.stops import STOPPED


HELP = """usage: isaac-ppo-study run STUDY [arms=A,B] [seeds=S,T] [runs_dir=DIR] [TRAIN_OVERRIDE ...]
       isaac-ppo-study report STUDY [runs_dir=DIR] [out=DIR]
       isaac-ppo-study placebo STUDY arm=ARM seed=S [draw=N] [runs_dir=DIR]

STUDY is cfg/study/<name>.yaml (or a path to such a file): `common` overrides for every run, `arms` (a name each,
with its overrides), `seeds`, and optionally `measure` (the evaluation key every number of the study reads:
return_mean, the default, or one of the task's solve_measures, e.g. FrankaCabinet's drawer_opened), `stop`
(`minutes`: stop a run when its clock, evaluation included, passes them; `at_return`: stop it at its first
evaluation return at or over the value; `at_measure`: the same for the study's measure) and, for the report,
`thresholds` (default: the task's solve_thresholds, or its solve_measures' for a measure) and `marks_min` (the
evaluation at these minutes), and
`archive` (NAME.tar.xz, one pack, or a folder, relative to the current directory: each finished run's small files
go there, so that a study run over several machines or sessions can be carried in git; see below).

`run` trains every (seed, arm), seeds outermost (so a cut study has every arm on its first seeds), each in its own
folder <runs_dir>/study/<name>/runs/<arm>/seed_<s> (hydra.run.dir), logging to .../logs/<arm>_seed_<s>.log.
A run that ended (its budget used, or the study's stop rule met) gets study_done.json and is skipped next time.
With `archive`, a finished run's small files (its rows, summary, config and study_done.json: what the report reads;
not its checkpoints, TensorBoard files, videos or train.log) are also archived under <arm>/seed_<s>: into the pack
the archive names when it ends in .tar.xz (isaac_ppo.lab.archive: one xz-compressed file, rewritten atomically
with the run added), else into the folder <archive>/<arm>/seed_<s>. A run found there is done on any machine that
has the archive, and the report reads it from there.
Resumable: relaunched after a kill or a time limit, the same command continues each cut run in place from its
last.pt (isaac-ppo-train's own rule: a run folder holding a run of the same config continues it; save_interval_iterations
sets how much is redone) and skips the finished ones. SIGTERM or Ctrl-C stops the running run (it saves) and
exits 75; if this process is killed outright, the run still gets SIGTERM and saves. A run killed before its first
checkpoint has nothing to continue: its folder is started again.

`report` writes <runs_dir>/study/<name>/report (or out=DIR): the clock view of every arm (isaac_ppo.lab.report.clock:
time to each threshold, evaluation return at the marks, where the time went, evaluation return against seconds and
against env steps), the runs' rows when the study keeps no archive (metrics.tar.xz; with an archive they are there
already), and, when runs ended on their budget, isaac-ppo-report's tables and figures over them.

`placebo` prints an arm to add to a study: the finished run's changes of split at random iterations
(isaac_ppo.lab.report.placebo; draw= seeds the draw, default the run's seed).
"""
USAGE = ("usage: isaac-ppo-study run STUDY [arms=A,B] [seeds=S,T] [runs_dir=DIR] [TRAIN_OVERRIDE ...] | "
         "isaac-ppo-study report STUDY [runs_dir=DIR] [out=DIR] | "
         "isaac-ppo-study placebo STUDY arm=ARM seed=S [draw=N] [runs_dir=DIR]")
_interrupted: List[int] = []
_running: List[Any] = []  # the run's process while one runs: a stop signal is handed on to it at once


def _on_stop_signal(number: int, frame: Any) -> None:
    """SIGTERM or Ctrl-C: stop the running run now (one SIGTERM: it finishes its iteration and saves), then exit."""
    _interrupted.append(number)
    if _running and _running[0].poll() is None and len(_interrupted) == 1:
        _running[0].send_signal(signal.SIGTERM)
        _running.append("handed on")


# each subcommand's own keys and their domains (lab/args.py checks them before anything is made); which arms and
# seeds a study has, select() checks once the study is read
_NARROW = {"arms": lab_args.names(), "seeds": lab_args.integers(integer())}
OWN_KEYS: Dict[str, Dict[str, lab_args.Arg]] = {
    "run": {**_NARROW, "runs_dir": lab_args.folder()},  # the runs are made there
    "report": {**_NARROW, "runs_dir": lab_args.folder(writes=False), "out": lab_args.folder()},
    "placebo": {**_NARROW, "runs_dir": lab_args.folder(writes=False), "arm": lab_args.name(),
                "seed": lab_args.number(integer()), "draw": lab_args.number(integer(0))},  # (draw: NumPy's seed)
}


def parse_args(argv: List[str]) -> Dict[str, Any]:
    if len(argv) < 2 or argv[0] not in OWN_KEYS:
        raise UserError(USAGE)
    keys = OWN_KEYS[argv[0]]
    words = parse(argv[2:], keys, f"isaac-ppo-study {argv[0]}", hands_on=argv[0] == "run")
    if "runs_dir" not in words.own:  # the default is checked as a given one is (run makes folders there)
        words.own["runs_dir"] = keys["runs_dir"].value("runs_dir", "runs")
    return {"command": argv[0], "study": argv[1], **words.own, "train": words.train}


def select(study: Dict[str, Any], args: Dict[str, Any]) -> None:
    """arms= and seeds= on the command line narrow the study (a subset of its own, never new ones)."""
    if "arms" in args:
        if not set(args["arms"]) <= set(study["arms"]):
            raise UserError(f"arms={','.join(args['arms'])}: the study's arms are {', '.join(study['arms'])}")
        study["arms"] = {a: study["arms"][a] for a in args["arms"]}
    if "seeds" in args:
        if not set(args["seeds"]) <= set(study["seeds"]):
            raise UserError(f"seeds={','.join(map(str, args['seeds']))}: the study's seeds are {study['seeds']}")
        study["seeds"] = args["seeds"]
    for word in args["train"]:
        if _key(word) in ("seed", "hydra.run.dir", "experiment"):
            raise UserError(f"{word}: the study sets seed, hydra.run.dir and experiment per run")


def run_one(root: str, study: Dict[str, Any], arm: str, seed: int, extra: List[str]) -> str:
    """Train (or continue) one run; how it ended: budget, minutes, at_return (or at_measure), stopped (by a signal
    to us) or failed."""
    folder = run_folder(root, arm, seed)
    if os.path.isdir(folder) and not os.path.isfile(os.path.join(folder, "checkpoints", "last.pt")):
        shutil.rmtree(folder)  # killed before its first checkpoint: nothing to continue, start it again
    overrides = study["common"] + study["arms"][arm] + extra
    command = train_command() + overrides + [f"seed={seed}", f"experiment={study['name']}", f"hydra.run.dir={folder}"]
    continuing = os.path.isdir(folder)
    rows_path = os.path.join(folder, "metrics.jsonl")
    rows_written = os.path.getmtime(rows_path) if os.path.isfile(rows_path) else None
    print(f"[study] {arm} seed {seed}: {'continuing' if continuing else 'starting'}: isaac-ppo-train "
          f"{' '.join(command[len(train_command()):])}", flush=True)
    os.makedirs(os.path.join(root, "logs"), exist_ok=True)
    stop = study["stop"]
    at = "at_measure" if "at_measure" in stop else "at_return"  # (the definition allows one, at_return for a return)
    progress = Progress(float(stop.get(at, float("inf"))), study["measure"])
    cap_s = 60.0 * float(stop.get("minutes", float("inf")))
    why = "budget"
    with open(os.path.join(root, "logs", f"{arm}_seed_{seed}.log"), "a") as log:
        # its own session: a Ctrl-C at the terminal reaches this process alone, which stops the run with one
        # SIGTERM (a second signal would make train abort without saving)
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
                                   start_new_session=True)
        _running[:] = [process]
        signalled = False
        while process.poll() is None:
            time.sleep(0.2)
            progress.read(rows_path)
            if signalled:
                continue
            if _interrupted:
                why, signalled = "stopped", True
                if "handed on" not in _running:  # (the signal came before the run was registered)
                    process.send_signal(signal.SIGTERM)
            elif progress.solved is not None or progress.elapsed >= cap_s:
                why, signalled = (at if progress.solved is not None else "minutes"), True
                process.send_signal(signal.SIGTERM)
        _running.clear()
    code = process.returncode
    said = None
    if code == 2:
        lines = [line for line in open(log.name).read().splitlines() if line.strip()]
        said = lines[-1] if lines else "(nothing)"
        ran = os.path.isfile(rows_path) and os.path.getmtime(rows_path) != rows_written
        if not ran:  # refused before it trained (a bad key, another run's folder): the study's mistake
            raise UserError(f"{arm} seed {seed}: isaac-ppo-train said: {said} (log: {log.name})")
        # it ran, then stopped itself (the divergence guard): an outcome of this run, which would stop the same
        # way again if continued (resume is exact), so it is done, and the report says how it ended
        why = "stopped itself"
    if code == STOPPED and not signalled:
        return "stopped"  # someone else stopped it: not done, continue it next time
    if code == -signal.SIGTERM and why in ("minutes", "at_return", "at_measure"):
        code = STOPPED  # (our SIGTERM landed as train was exiting, past its handler: its rows are written)
    if code == 1 and why in ("minutes", "at_return", "at_measure") and _rl_games(overrides):
        # an rl-games run stops at the end of its epoch and exits 1 (it cannot be resumed): stopped by the study at
        # its goal or its clock, it ended as the study asked (its rows are written)
        code = STOPPED
    if code not in (0, STOPPED, 2) or why == "stopped":
        return "stopped" if why == "stopped" else f"failed (exit {code}, log: {log.name})"
    progress.read(rows_path)
    from isaac_ppo.lab.report.clock import machine

    record = {"arm": arm, "seed": seed, "overrides": overrides + [f"seed={seed}"], "ended_by": why, "machine": machine(),
              "clock_s": round(progress.elapsed, 3), "env_steps": (read_rows(rows_path) or [{}])[-1].get("env_steps")}
    if said is not None:
        record["message"] = said
    gait = gait_check(folder)
    if gait is not None:
        record["gait"] = gait
    with open(os.path.join(folder, DONE + ".tmp"), "w") as f:
        json.dump(record, f, indent=1)
    os.replace(os.path.join(folder, DONE + ".tmp"), os.path.join(folder, DONE))
    return why


def _rl_games(overrides: List[str]) -> bool:
    """Whether a run's overrides train with rl-games' learner (agent=rl_games, agent.backend=rl_games)."""
    return any(word in ("agent=rl_games", "agent.backend=rl_games") for word in overrides)


def gait_check(folder: str) -> Optional[Dict[str, Any]]:
    """The gait check (isaac_ppo.lab.gait) of a run's last checkpoint, before the archive leaves the checkpoints
    behind: how the policy moves (Ant, Humanoid: its torso's speed; Anymal: its speed and command tracking;
    BallBalance: where it keeps the ball), next to the return it was paid. None for a task without a gait (Cartpole)."""
    from omegaconf import OmegaConf

    from isaac_ppo.lab import gait

    last = os.path.join(folder, "checkpoints", "last.pt")
    config = os.path.join(folder, "config.yaml")
    if not (os.path.isfile(last) and os.path.isfile(config)):
        return None
    task = OmegaConf.to_container(OmegaConf.load(config).task, resolve=True)
    if gait.gait_of(task) is None:
        return None
    result = gait.check(last, task["name"])
    result.pop("checkpoint")
    return result


def run_study(study: Dict[str, Any], runs_dir: str, extra: List[str]) -> int:
    root = study_root(runs_dir, study)
    os.makedirs(root, exist_ok=True)
    pairs = [(arm, seed) for seed in study["seeds"] for arm in study["arms"]]
    done = [p for p in pairs if finished_folder(root, study, *p)]
    for pair in done:  # (finished before the archive was set, or before its copy was made)
        target = archived_folder(study, *pair)
        if target and not os.path.isfile(os.path.join(target, DONE)):
            archive_run(run_folder(root, *pair), study, *pair)
    where = f"; archive {os.path.abspath(study['archive'])}" if study["archive"] else ""
    print(f"[study] {study['name']} ({study['path']}): {len(done)}/{len(pairs)} runs done; folder {root}{where}",
          flush=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_stop_signal)
    failed = []
    for arm, seed in pairs:
        if _interrupted:
            break
        if (arm, seed) in done:
            continue
        ended = run_one(root, study, arm, seed, extra)
        if study["archive"] and os.path.isfile(os.path.join(run_folder(root, arm, seed), DONE)):
            archive_run(run_folder(root, arm, seed), study, arm, seed)
        print(f"[study] {arm} seed {seed}: {ended}", flush=True)
        if ended.startswith("failed"):
            failed.append(f"{arm} seed {seed}")
    if _interrupted:
        print(f"[study] stopped by signal {_interrupted[0]}: run the same command to continue", flush=True)
        return STOPPED
    if failed:
        print(f"[study] {len(failed)} runs failed ({', '.join(failed)}): see {root}/logs; the same command "
              f"retries them", flush=True)
        return 1
    print(f"[study] all {len(pairs)} runs done: isaac-ppo-study report {study['path']}", flush=True)
    return 0


def report_study(study: Dict[str, Any], runs_dir: str, out: Optional[str]) -> int:
    from isaac_ppo.lab.report import clock

    root = study_root(runs_dir, study)
    if out is None:  # (an out= given was checked with the arguments)
        out = os.path.join(root, "report")
        lab_args.folder().value("runs_dir", out)  # the report goes under runs_dir: writable, before any is made
    runs: Dict[str, List[str]] = {}
    records: Dict[str, Dict[str, Any]] = {}  # run folder -> its study_done.json
    for arm in study["arms"]:
        for seed in study["seeds"]:
            folder = finished_folder(root, study, arm, seed)
            if folder:
                with open(os.path.join(folder, DONE)) as f:
                    records[folder] = json.load(f)
                runs.setdefault(arm, []).append(folder)
    if not runs:
        raise UserError(f"{root}: no finished run of study {study['name']} yet: isaac-ppo-study run {study['path']}")
    machines: List[Dict[str, Any]] = []
    for record in records.values():
        if record.get("machine") and record["machine"] not in machines:
            machines.append(record["machine"])
    ended_otherwise = [f"{r['arm']} seed {r['seed']}: stopped itself after {r['clock_s'] / 60:.1f} min of its clock, "
                       f"{r['env_steps']:,} env steps: {r.get('message', '')}"
                       for r in records.values() if r["ended_by"] == "stopped itself"]
    machine_of = {folder: record.get("machine") for folder, record in records.items()}
    # a study with an archive keeps its runs' rows there: no second copy of them beside the report
    written = clock.write(runs, study, out, machines, ended_otherwise, machine_of, copies=not study["archive"])
    checked = {folder: r["gait"] for folder, r in records.items() if "gait" in r}
    flagged: Dict[str, str] = {}  # run folder -> "arm seed s", for the runs past the gait flag
    if checked:
        from isaac_ppo.lab.gait import flagged as past_the_flag, write_table

        written.append(write_table(records, checked, out))
        flagged = {f: f"{records[f]['arm']} seed {records[f]['seed']}" for f in past_the_flag(checked)}
    if study["compare"] or study["predict"]:
        from isaac_ppo.lab.report import compare, retest

        written += compare.write(runs, study, out, flagged)
        written += retest.write(runs, study, out, flagged)
    budget_runs = [folder for folder, record in records.items() if record["ended_by"] == "budget"]
    if budget_runs:
        from isaac_ppo.lab.report import run_report, parse_args as report_args

        metric = [] if study["measure"] == RETURN_MEAN else [f"metric=eval.{study['measure']}"]
        written += run_report(report_args(budget_runs + ["--out", out] + metric),
                               names={folder: records[folder]["arm"] for folder in budget_runs})
    print("[study] wrote:\n  " + "\n  ".join(written), flush=True)
    return 0


def print_placebo(study: Dict[str, Any], args: Dict[str, Any]) -> int:
    import yaml

    from isaac_ppo.lab.report.placebo import placebo_overrides

    if "seed" not in args:
        raise UserError("placebo needs seed=S (an integer: the run whose changes it copies)")
    seed = args["seed"]
    draw = args.get("draw", abs(seed))  # (NumPy's seed: never negative)
    if args.get("arm") not in study["arms"]:
        raise UserError(f"placebo needs arm=, one of the study's: {', '.join(study['arms'])}")
    root = study_root(args["runs_dir"], study)
    folder = finished_folder(root, study, args["arm"], seed)
    if folder is None:
        raise UserError(f"{run_folder(root, args['arm'], seed)} holds no finished run: isaac-ppo-study run "
                        f"{study['path']} first")
    pool = None  # the run's env pool, when its config set one
    if os.path.isfile(os.path.join(folder, "config.yaml")):
        with open(os.path.join(folder, "config.yaml")) as f:
            pool = (yaml.safe_load(f) or {}).get("num_envs")
    # the arm's own overrides but its schedule (and pool, read back from the run): the placebo differs in when
    # the split changes, nothing else
    kept = [w for w in study["arms"][args["arm"]] if not _key(w).startswith("scheduler") and _key(w) != "num_envs"]
    words = kept + placebo_overrides(read_rows(os.path.join(folder, "metrics.jsonl")), draw, pool)
    print(f"placebo_{args['arm']}_seed_{seed}: {json.dumps(words)}")
    return 0


def _study_command(argv: List[str]) -> int:
    args = parse_args(argv)
    study = load_study(args["study"])
    select(study, args)
    if args["command"] == "run":
        return run_study(study, args["runs_dir"], args["train"])
    if args["command"] == "placebo":
        return print_placebo(study, args)
    return report_study(study, args["runs_dir"], args.get("out"))


def main(argv: Optional[List[str]] = None) -> int:
    return run_command("isaac-ppo-study", HELP, sys.argv[1:] if argv is None else argv, _study_command)


if __name__ == "__main__":
    sys.exit(main())
