"""isaac-ppo-tune: a resumable Optuna study over isaac-ppo-train's settings, minimising time to a solve threshold.

Why this shape: each trial is a real isaac-ppo-train watched from outside and stopped when it solves, times out or
is pruned; the objective ranks every miss behind every solve but keeps a slope among misses; Optuna is driven
directly (Hydra's Optuna sweeper pins an Optuna whose storage fails under SQLAlchemy 2, and cannot stop a trial
early). HELP is --help.
"""
from __future__ import annotations

import csv
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from isaac_ppo.domains import integer, positive
from isaac_ppo.config.files import load_named, task_goals
from isaac_ppo.errors import UserError
from isaac_ppo.lab import args
from isaac_ppo.lab.args import key_of as _key
from isaac_ppo.lab.args import parse, run_command
from isaac_ppo.loop.stops import STOPPED
from isaac_ppo.lab.watch import RETURN_MEAN, Progress, die_with_parent, train_command


HELP = """usage: isaac-ppo-tune space=NAME trials=N study=NAME [storage=URL] [trial_cap_s=S] [TRAIN_OVERRIDE ...]

The search space is cfg/tune/<space>.yaml (or a path to such a file): fixed overrides, the keys searched, the
threshold (default: the task's first `solve_thresholds`), the per-trial wall-clock cap and the pruner's settings.
`measure` (default: return_mean) names what the threshold is of: return_mean, or one of the task's
`solve_measures` (FrankaCabinet's drawer_opened, ShadowHand's successes), whose first threshold is then the default,
as it is when the task has solve_measures and no solve_thresholds.
Each trial is a real `isaac-ppo-train` subprocess (runs_dir=<study folder>/trials, experiment=trial_<n>); this
process reads its metrics.jsonl while it runs and stops it with SIGTERM (train saves and exits 75) when the
evaluation return reaches the threshold, when the trial's training clock passes the cap, or when the pruner says so.

The objective is the seconds from the start of training (evaluation included) at which the evaluation's
return_mean (or measure) first reached the threshold: metrics.json's `solve_times` (`measure_solve_times`) when
the run wrote it, else the rows
(row["eval"]["wall_s"], or the row's wall_s plus the evaluations' own seconds so far). A trial that misses scores
cap * (1 + gap), gap = (threshold - best eval return) / |threshold| clipped to [0, 1]: every miss ranks behind
every solve (all of which score <= cap), and among misses the one that came closer ranks better, so the sampler
sees a slope instead of a plateau of equal failures. The pruner (MedianPruner) compares that same score at fixed
ticks of training time (report_every_s), so trials are compared at equal wall clock, the quantity minimised; a
trial is judged from its first evaluation on (before it, there is nothing to judge it by).

Optuna is driven directly, not through Hydra's Optuna sweeper: hydra-optuna-sweeper 1.3 pins optuna 2.10, whose
SQLite storage fails under SQLAlchemy 2, and the sweeper cannot stop a trial early. `start` (a list of settings
naming every searched key) is queued as a new study's first trials, so the history holds the point the search sets
out to beat. The study lives in an Optuna storage (default sqlite:///<runs_dir>/tune/<study>/study.db) opened with
load_if_exists, so the same command resumes: finished trials (complete or pruned) count toward trials=N; a trial
left RUNNING by a tuner that was killed (its process gone on this host) is marked FAIL and its parameters are queued
again. SIGTERM or Ctrl-C stops the running trial (train saves), marks it FAIL with its parameters queued, and exits
75.
"""
USAGE = ("usage: isaac-ppo-tune space=NAME trials=N study=NAME [storage=URL] [trial_cap_s=S] "
         "[TRAIN_OVERRIDE ...]")
OWN_KEYS: Dict[str, args.Arg] = {  # each own key's domain (lab/args.py checks it before anything is made)
    "space": args.text("a search space: cfg/tune/NAME.yaml, or a path to such a file"),
    "trials": args.number(integer(1)),  # the study's finished trials to reach
    "study": args.name(),
    "storage": args.text("a database URL, DIALECT://... (sqlite:///PATH/study.db)", r"[A-Za-z][\w+.-]*://.+"),
    "trial_cap_s": args.number(positive()),  # seconds of training per trial
}
SPEC_KINDS = ("choices", "int", "float")
_interrupted: List[int] = []


def parse_args(argv: List[str]) -> Tuple[Dict[str, Any], List[str]]:
    """isaac-ppo-tune's own keys, and the overrides handed on to every trial."""
    words = parse(argv, OWN_KEYS, USAGE, hands_on=True)
    own: Dict[str, Any] = dict(words.own)
    train = words.train
    if any(_key(word) == "experiment" for word in train):
        raise UserError("experiment= is set per trial (trial_<n>); name the sweep with study=NAME")
    missing = [k for k in ("space", "trials", "study") if k not in own]
    if missing:
        raise UserError(f"missing {', '.join(k + '=' for k in missing)}; {USAGE}")
    return own, train


def _goal(where: str, space: Dict[str, Any]) -> Tuple[str, float]:
    """(measure, threshold) of the space: given, or the task's (module docstring's HELP: the defaults)."""
    returns, measures = task_goals(space["task"])
    measure = space.get("measure")
    if measure is None:
        given_or_return = space.get("threshold") is not None or returns or not measures
        measure = RETURN_MEAN if given_or_return else next(iter(measures))
    if measure != RETURN_MEAN and measure not in measures:
        named = ", ".join([RETURN_MEAN] + list(measures))
        raise UserError(f"{where}: measure={measure!r}: the task {space['task']} is solved by {named}")
    if space.get("threshold") is not None:
        return measure, float(space["threshold"])
    listed = returns if measure == RETURN_MEAN else measures[measure]
    if not listed:
        raise UserError(f"{where}: threshold: the task {space['task']} lists no solve_thresholds; set one")
    return measure, float(listed[0])


def load_space(name: str) -> Dict[str, Any]:
    """cfg/tune/<name>.yaml (or the file name names), checked: every mistake is one line naming the key."""
    path, space = load_named("tune", name, f"space={name}: no search space")
    where = f"space {path}"
    if not isinstance(space, dict) or not isinstance(space.get("task"), str):
        raise UserError(f"{where}: needs task: NAME")
    space.setdefault("fixed", [])
    if not isinstance(space["fixed"], list) or not all(isinstance(w, str) and "=" in w for w in space["fixed"]):
        raise UserError(f"{where}: fixed must be a list of KEY=VALUE overrides")
    search = space.get("search")
    if not isinstance(search, dict) or not search:
        raise UserError(f"{where}: search must map override keys to {{choices: [...]}}, {{int: [lo, hi]}} or "
                        f"{{float: [lo, hi], log: true}}")
    for key, spec in search.items():
        kinds = [k for k in SPEC_KINDS if isinstance(spec, dict) and k in spec]
        if len(kinds) != 1:
            raise UserError(f"{where}: search.{key} needs exactly one of {', '.join(SPEC_KINDS)}")
        values = spec[kinds[0]]
        if kinds[0] == "choices":
            if not values or not all(isinstance(v, (str, int, float, bool)) for v in values):
                raise UserError(f"{where}: search.{key}.choices: a non-empty list of numbers or strings (write a "
                                f"list value as a string, \"[256,128]\")")
        elif not (isinstance(values, list) and len(values) == 2 and all(isinstance(v, (int, float)) for v in values)
                  and values[0] < values[1]):
            raise UserError(f"{where}: search.{key}.{kinds[0]}: [low, high] with low < high")
    space["start"] = _start_points(where, space.get("start") or [], search)
    space["measure"], space["threshold"] = _goal(where, space)
    space.setdefault("trial_cap_s", 600.0)
    space.setdefault("report_every_s", max(1.0, float(space["trial_cap_s"]) / 20))
    space.setdefault("pruner", {})
    space.setdefault("sampler", {})
    space.setdefault("seeds", None)
    space["path"] = path
    return space


def _start_points(where: str, start: Any, search: Dict[str, Any]) -> List[Dict[str, Any]]:
    """`start`: settings the study tries first (the committed profile, say), each naming every searched key with a
    value its spec allows, so that the search's history holds the point it sets out to beat."""
    if not isinstance(start, list) or not all(isinstance(point, dict) for point in start):
        raise UserError(f"{where}: start must be a list of {{KEY: VALUE}} settings, one per first trial")
    for n, point in enumerate(start):
        missing, unknown = sorted(set(search) - set(point)), sorted(set(point) - set(search))
        if missing or unknown:
            raise UserError(f"{where}: start[{n}] must name every searched key and no other "
                            f"({'missing ' + ', '.join(missing) if missing else 'not searched ' + ', '.join(unknown)})")
        for key, value in point.items():
            spec = search[key]
            low, high = spec.get("int", spec.get("float", (None, None)))
            inside = (value in spec["choices"] if "choices" in spec else
                      isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high)
            if not inside:
                raise UserError(f"{where}: start[{n}].{key}: {value!r} is outside search.{key}")
    return start


def sample(trial: Any, search: Dict[str, Any]) -> Dict[str, Any]:
    params: Dict[str, Any] = {}
    for key, spec in search.items():
        if "choices" in spec:
            params[key] = trial.suggest_categorical(key, spec["choices"])
        elif "int" in spec:
            params[key] = trial.suggest_int(key, int(spec["int"][0]), int(spec["int"][1]), log=bool(spec.get("log")))
        else:
            params[key] = trial.suggest_float(key, float(spec["float"][0]), float(spec["float"][1]),
                                              log=bool(spec.get("log")))
    return params


def score(threshold: float, cap_s: float, solved_s: Optional[float], best: Optional[float]) -> float:
    """Seconds to the threshold; a miss scores the cap plus the remaining gap (module docstring: why)."""
    if solved_s is not None:
        return float(solved_s)
    gap = 1.0 if best is None else (threshold - best) / max(abs(threshold), 1e-9)
    return cap_s * (1.0 + min(max(gap, 0.0), 1.0))


def run_trial(trial: Any, command: List[str], run_root: str, space: Dict[str, Any], cap_s: float) -> Dict[str, Any]:
    """One isaac-ppo-train subprocess, watched and stopped as the module docstring says; what it reached."""
    import optuna

    os.makedirs(run_root, exist_ok=True)
    log_path = os.path.join(run_root, f"trial_{trial.number}.log")
    measure = space.get("measure", RETURN_MEAN)
    progress, tick_s = Progress(space["threshold"], measure), float(space["report_every_s"])
    reported, stopped, why = 0, False, "finished"
    started = time.perf_counter()
    with open(log_path, "w") as log:
        # its own session: a Ctrl-C at the terminal reaches the tuner alone, which stops the trial with one SIGTERM
        # (a second signal would make train abort without saving)
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
                                   start_new_session=True)
        while True:
            done = process.poll() is not None
            runs = sorted(glob.glob(os.path.join(run_root, f"trial_{trial.number}", "*", "metrics.jsonl")))
            if runs:
                progress.read(runs[-1])
            while not stopped and (reported + 1) * tick_s <= progress.elapsed:
                reported += 1
                if progress.best is None:
                    # no evaluation yet: nothing to judge the trial on (scored as the whole gap, a trial whose first
                    # evaluation comes late is pruned for not having evaluated: benchmarks/history/ant.md, issue 44)
                    continue
                trial.report(score(space["threshold"], cap_s, progress.solved and progress.solved[0], progress.best),
                             reported)
                if progress.solved is None and trial.should_prune():
                    why = "pruned"
                    break
            if not stopped and not done:
                hung = time.perf_counter() - started > 2 * cap_s + 120  # startup, or a train that stopped logging
                reason = ("interrupted" if _interrupted else "solved" if progress.solved else why if why == "pruned"
                          else "cap" if progress.elapsed >= cap_s or hung else None)
                if reason:
                    why, stopped = reason, True
                    process.send_signal(signal.SIGTERM)
            if done:
                break
            time.sleep(0.25)
    lines = [line for line in open(log_path).read().splitlines() if line.strip()]
    if process.returncode == 2 and not stopped:
        raise UserError(f"trial {trial.number}: isaac-ppo-train said: {lines[-1] if lines else '(nothing)'} "
                        f"(log: {log_path})")
    # (our SIGTERM can land as train exits on its own, past its handler: killed by it, with its files written)
    if process.returncode not in (0, STOPPED) + ((-signal.SIGTERM,) if stopped else ()):
        if why == "interrupted":  # stopped before train could save (still starting): nothing to read
            return {"stopped": why}
        raise RuntimeError(f"isaac-ppo-train exited {process.returncode}: {lines[-1] if lines else ''}")
    summary_path = os.path.join(os.path.dirname(runs[-1]), "metrics.json") if runs else ""
    summary = json.load(open(summary_path)) if summary_path and os.path.isfile(summary_path) else {}
    recorded = (summary.get("solve_times") if measure == RETURN_MEAN else
                [e for e in summary.get("measure_solve_times") or [] if e.get("measure") == measure])
    for entry in recorded or []:  # the run's own record wins over the rows when it has one
        if abs(float(entry.get("threshold", float("nan"))) - space["threshold"]) < 1e-9:
            progress.solved = (entry["seconds"], entry.get("env_steps")) if entry.get("seconds") is not None else None
    solved_s = progress.solved[0] if progress.solved else None
    if why == "pruned" and solved_s is None:
        for key, value in (("best_eval", progress.best), ("stopped", why), ("train_s", round(progress.elapsed, 3)),
                           ("run_dir", os.path.dirname(runs[-1]) if runs else "")):
            trial.set_user_attr(key, value)
        raise optuna.TrialPruned()
    return {"value": score(space["threshold"], cap_s, solved_s, progress.best), "solved_s": solved_s,
            "solved_env_steps": progress.solved[1] if progress.solved else None, "best_eval": progress.best,
            "stopped": why, "train_s": round(progress.elapsed, 3), "run_dir": os.path.dirname(runs[-1]) if runs else ""}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def retry_stale(study: Any) -> None:
    """Trials left RUNNING by a tuner of this host that is gone: FAIL, their parameters queued again."""
    from optuna.trial import TrialState

    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        attrs = trial.user_attrs
        if attrs.get("host") == socket.gethostname() and not _alive(int(attrs.get("tuner_pid", -1))):
            study.tell(trial.number, state=TrialState.FAIL)
            study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
            print(f"[tune] trial {trial.number} was running when its tuner died: marked FAIL, queued again", flush=True)


def other_machines(trials: List[Any], here: str) -> Optional[str]:
    """A line when finished trials ran on another machine kind than this one: the objective is seconds, and a
    machine with other vector units or cores runs the same settings up to 2x faster, so a study resumed elsewhere
    ranks trials partly by the machine (say so; the best trial's confirmation on fresh seeds is run on one)."""
    kinds: Dict[str, int] = {}
    for t in trials:
        kind = t.user_attrs.get("machine")
        if kind and kind != here and t.state.name in ("COMPLETE", "PRUNED"):
            kinds[kind] = kinds.get(kind, 0) + 1
    if not kinds:
        return None
    others = "; ".join(f"{n} on {kind}" for kind, n in sorted(kinds.items()))
    return (f"[tune] note: finished trials ran on another machine ({others}); this one is {here}: their seconds "
            f"are not this machine's, so confirm the best trial on fresh seeds on one machine")


def trial_overrides(space: Dict[str, Any], extra: List[str], params: Dict[str, Any]) -> List[str]:
    mine = {_key(w) for w in extra}
    fixed = [w for w in space["fixed"] if _key(w) not in mine]
    return fixed + extra + [f"{key}={value}" for key, value in params.items()]


def write_results(study: Any, folder: str, space: Dict[str, Any], extra: List[str]) -> Optional[Dict[str, Any]]:
    """history.csv (every trial) and best.json (the best complete trial: value and overrides)."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    keys = sorted({k for t in trials for k in t.params})
    columns = ["number", "state", "value", "solved_s", "best_eval", "stopped", "seed", "train_s", "machine", "run_dir"]
    with open(os.path.join(folder, "history.csv.tmp"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns + keys)
        for t in trials:
            attrs = t.user_attrs
            writer.writerow([t.number, t.state.name, t.value] + [attrs.get(c, "") for c in columns[3:]]
                            + [t.params.get(k, "") for k in keys])
    os.replace(os.path.join(folder, "history.csv.tmp"), os.path.join(folder, "history.csv"))
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if not complete:
        return None
    best = min(complete, key=lambda t: t.value)
    result = {"study": study.study_name, "space": space["path"], "measure": space["measure"],
              "threshold": space["threshold"],
              "value": best.value, "trial": best.number, "solved_s": best.user_attrs.get("solved_s"),
              "best_eval": best.user_attrs.get("best_eval"), "params": best.params,
              "overrides": trial_overrides(space, extra, best.params), "run_dir": best.user_attrs.get("run_dir")}
    with open(os.path.join(folder, "best.json.tmp"), "w") as f:
        json.dump(result, f, indent=1)
    os.replace(os.path.join(folder, "best.json.tmp"), os.path.join(folder, "best.json"))
    return result


def tune(own: Dict[str, Any], extra: List[str]) -> int:
    try:
        import optuna
    except ImportError:
        raise UserError("isaac-ppo-tune needs Optuna: pip install 'isaac-ppo[tune]'") from None
    from optuna.trial import TrialState
    from sqlalchemy.exc import SQLAlchemyError  # (Optuna's storage: a URL no database answers raises these)

    space = load_space(own["space"])
    goal = (f"return {space['threshold']:g}" if space["measure"] == RETURN_MEAN
            else f"{space['measure']} {space['threshold']:g}")
    cap_s = float(own.get("trial_cap_s", space["trial_cap_s"]))
    search = {k: v for k, v in space["search"].items() if k not in {_key(w) for w in extra}}  # given: fixed
    runs_dir = next((w.partition("=")[2] for w in reversed(extra) if _key(w) == "runs_dir"), "runs")
    args.folder().value("runs_dir", runs_dir)  # the study's folder goes there: writable, before it is made
    extra = [w for w in extra if _key(w) != "runs_dir"]
    folder = os.path.abspath(os.path.join(runs_dir, "tune", own["study"]))
    storage = own.get("storage") or "sqlite:///" + os.path.join(folder, "study.db")
    if "storage" not in own:
        os.makedirs(folder, exist_ok=True)  # (SQLite makes its file, not the folder)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner = optuna.pruners.MedianPruner(**space["pruner"])
    sampler = optuna.samplers.TPESampler(**space["sampler"])
    try:
        study = optuna.create_study(study_name=own["study"], storage=storage, sampler=sampler, pruner=pruner,
                                    direction="minimize", load_if_exists=True)
    except (ValueError, ImportError, optuna.exceptions.StorageInternalError, SQLAlchemyError) as error:
        reason = (str(error).splitlines() or [type(error).__name__])[0]  # (SQLAlchemy adds a line of links)
        raise UserError(f"storage={storage}: cannot open the study: {reason}") from None
    os.makedirs(folder, exist_ok=True)  # (with storage= given, made once the study opened: a refusal makes none)
    retry_stale(study)
    if not study.get_trials(deepcopy=False):  # a new study: its first trials are the space's start points
        for point in space["start"]:
            study.enqueue_trial(point, user_attrs={"start_point": True})
    from isaac_ppo.lab.report.clock import machine, machine_label  # (here: a refusal above stays quick)

    here = machine_label(machine())
    note = other_machines(study.get_trials(deepcopy=False), here)
    if note:
        print(note, flush=True)
    finished_states = (TrialState.COMPLETE, TrialState.PRUNED)
    print(f"[tune] study {own['study']} ({storage}): {len(study.get_trials(states=finished_states))}/{own['trials']} "
          f"trials finished; space {space['path']}; objective: training seconds to eval {goal} (cap {cap_s:g} s)",
          flush=True)
    failures = 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, frame: _interrupted.append(number))
    while len(study.get_trials(deepcopy=False, states=finished_states)) < own["trials"] and not _interrupted:
        trial = study.ask()
        trial.set_user_attr("host", socket.gethostname())
        trial.set_user_attr("tuner_pid", os.getpid())
        trial.set_user_attr("machine", here)
        params = sample(trial, search)
        seeds, explicit = space["seeds"], any(_key(w) == "seed" for w in extra)
        seed = None if explicit else (seeds[trial.number % len(seeds)] if seeds else trial.number)
        overrides = trial_overrides(space, extra, params) + ([] if seed is None else [f"seed={seed}"]) + [
            f"runs_dir={os.path.join(folder, 'trials')}", f"experiment=trial_{trial.number}"]
        trial.set_user_attr("seed", seed if seed is not None else "given")
        print(f"[tune] trial {trial.number}: isaac-ppo-train {' '.join(overrides)}", flush=True)
        try:
            result = run_trial(trial, train_command() + overrides, os.path.join(folder, "trials"), space, cap_s)
        except optuna.TrialPruned:
            study.tell(trial, state=TrialState.PRUNED)
            print(f"[tune] trial {trial.number} PRUNED", flush=True)
            continue
        except UserError:
            study.tell(trial, state=TrialState.FAIL)
            raise
        except (RuntimeError, OSError, ValueError) as error:
            study.tell(trial, state=TrialState.FAIL)
            failures += 1
            print(f"[tune] trial {trial.number} FAIL: {error}", flush=True)
            if failures >= 3:
                raise UserError(f"3 trials failed (the last: {error}); see {folder}/trials/*.log") from None
            continue
        if result["stopped"] == "interrupted":
            study.tell(trial, state=TrialState.FAIL)
            study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
            break
        for key, value in result.items():
            if key != "value":
                trial.set_user_attr(key, value)
        study.tell(trial, result["value"])
        solved = (f"reached {goal} at {result['solved_s']:.1f} s" if result["solved_s"] is not None
                  else f"missed (best eval {result['best_eval']})")
        print(f"[tune] trial {trial.number} COMPLETE value {result['value']:.2f}: {solved}, stopped by "
              f"{result['stopped']}, {result['train_s']:.1f} s of training; {result['run_dir']}", flush=True)
        write_results(study, folder, space, extra)
    best = write_results(study, folder, space, extra)
    if _interrupted:
        print(f"[tune] stopped by signal {_interrupted[0]}: run the same command to resume the study", flush=True)
        return STOPPED
    if best:
        print(f"[tune] best: trial {best['trial']} value {best['value']:.2f}: isaac-ppo-train "
              f"{' '.join(best['overrides'])}", flush=True)
    print(f"[tune] results in {folder}: best.json, history.csv, study.db, trials/", flush=True)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command("isaac-ppo-tune", HELP, sys.argv[1:] if argv is None else argv,
                       lambda words: tune(*parse_args(words)))


if __name__ == "__main__":
    sys.exit(main())
