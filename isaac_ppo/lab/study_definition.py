"""A study's definition and where its runs live: cfg/study/<name>.yaml read and checked (every mistake one line
naming the key), each run's folder, and the archive a finished run is kept in and read back from.

Apart from the command (lab/study.py) so that the report, the tests and other tools read a study the way it runs.
"""
from __future__ import annotations

import os
import re
import shutil
from typing import Any, Dict, Optional

from isaac_ppo.config.files import cfg_dir, default_task, load_named, task_goals
from isaac_ppo.errors import UserError
from isaac_ppo.lab import archive
from isaac_ppo.lab.args import key_of as _key
from isaac_ppo.lab.watch import RETURN_MEAN

DONE = "study_done.json"
NAME = re.compile(r"[A-Za-z0-9_.-]+")


def load_study(name: str) -> Dict[str, Any]:
    """cfg/study/<name>.yaml (or the file name names), checked: every mistake is one line naming the key."""
    path, study = load_named("study", name, f"{name}: no study")
    where = f"study {path}"
    if not isinstance(study, dict):
        raise UserError(f"{where}: needs common:, arms: and seeds:")
    study["name"] = os.path.splitext(os.path.basename(path))[0]
    study["path"] = path
    study["source"] = f"cfg/study/{study['name']}.yaml" if path.startswith(cfg_dir("study")) else path  # (for reports)
    study.setdefault("common", [])
    if not isinstance(study["common"], list) or not all(isinstance(w, str) and "=" in w for w in study["common"]):
        raise UserError(f"{where}: common must be a list of KEY=VALUE overrides")
    arms = study.get("arms")
    if not isinstance(arms, dict) or not arms:
        raise UserError(f"{where}: arms must map a name to a list of KEY=VALUE overrides (an empty list: common only)")
    for arm, overrides in arms.items():
        if not NAME.fullmatch(str(arm)):
            raise UserError(f"{where}: arms.{arm}: letters, digits, '_', '.', '-' only (it names a folder)")
        if overrides is None:
            arms[arm] = overrides = []
        if not isinstance(overrides, list) or not all(isinstance(w, str) and "=" in w for w in overrides):
            raise UserError(f"{where}: arms.{arm} must be a list of KEY=VALUE overrides")
        clash = [w for w in study["common"] + overrides if _key(w) in ("seed", "hydra.run.dir", "experiment")]
        if clash:
            raise UserError(f"{where}: {clash[0]}: the study sets seed, hydra.run.dir and experiment per run")
    seeds = study.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise UserError(f"{where}: seeds must be a non-empty list of integers")
    _check_measure(study, where)
    stop = study.setdefault("stop", {}) or {}
    unknown = sorted(set(stop) - {"minutes", "at_return", "at_measure"})
    if unknown or not all(isinstance(v, (int, float)) and v > 0 for k, v in stop.items() if k == "minutes"):
        raise UserError(f"{where}: stop takes minutes (more than 0), at_return and at_measure only"
                        + (f", not {unknown[0]}" if unknown else ""))
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for k, v in stop.items() if k != "minutes"):
        raise UserError(f"{where}: stop.at_return and stop.at_measure take a number (the evaluation's value)")
    if "at_return" in stop and ("at_measure" in stop or study["measure"] != RETURN_MEAN):
        raise UserError(f"{where}: stop.at_return stops at a return; this study's measure is {study['measure']}: "
                        f"use stop.at_measure")
    study["stop"] = stop
    study.setdefault("marks_min", [])
    study.setdefault("thresholds", None)
    archive = study.setdefault("archive", None)
    if archive is not None and not (isinstance(archive, str) and archive.strip()):
        raise UserError(f"{where}: archive must be a folder or a pack (NAME.tar.xz), relative to the current "
                        f"directory")
    _check_comparisons(study, where)
    return study


def task_of(study: Dict[str, Any], arm: str) -> str:
    """The task an arm trains (its last task= among the common and the arm's overrides; else config.yaml's)."""
    named = [w.split("=", 1)[1] for w in study["common"] + study["arms"][arm] if _key(w) == "task"]
    return named[-1] if named else default_task()


def _check_measure(study: Dict[str, Any], where: str) -> None:
    """measure: the evaluation key every number of the study reads (return_mean, the default, or one of each
    arm's task's solve_measures: FrankaCabinet's drawer_opened), checked against the packaged task configs."""
    measure = study.setdefault("measure", RETURN_MEAN)
    if not (isinstance(measure, str) and measure.strip()):
        raise UserError(f"{where}: measure names an evaluation key: {RETURN_MEAN} (the default) or one of the "
                        f"task's solve_measures")
    if measure == RETURN_MEAN:
        return
    for arm in study["arms"]:
        task = task_of(study, arm)
        measures = task_goals(task)[1]
        if measure not in measures:
            raise UserError(f"{where}: measure={measure}: arm {arm}'s task {task} is solved by "
                            f"{', '.join([RETURN_MEAN] + list(measures))}")


def _check_comparisons(study: Dict[str, Any], where: str) -> None:
    """compare: [{claim, a, b, metric, expect, kind, margin}] (a and b two arms, or for an interaction each a pair
    [HI, LO] of arms) and predict: {arms, diagnostics, at_fraction} (report/compare.py)."""
    from isaac_ppo.lab.report.compare import EXPECT, KINDS

    def side(value: Any) -> bool:
        names = value if isinstance(value, list) else [value]
        return len(names) in (1, 2) and all(isinstance(n, str) and n in study["arms"] for n in names)

    study.setdefault("compare", [])
    for i, spec in enumerate(study["compare"]):
        if not isinstance(spec, dict) or not side(spec.get("a")) or not side(spec.get("b")) \
                or isinstance(spec["a"], list) != isinstance(spec["b"], list):
            raise UserError(f"{where}: compare[{i}] needs a: and b:, two of the arms, or for an interaction two "
                            f"pairs [HI, LO] of them ({', '.join(study['arms'])})")
        kind, margin = spec.get("kind", "direction"), spec.get("margin")
        if kind not in KINDS:
            raise UserError(f"{where}: compare[{i}].kind={kind}: {', '.join(KINDS)}")
        if kind != "direction" and not (isinstance(margin, (int, float)) and not isinstance(margin, bool)
                                        and 0 < margin < 1):
            raise UserError(f"{where}: compare[{i}].margin={margin}: kind={kind} needs a margin, a fraction in "
                            f"(0, 1) of the reference's mean (0.1: 10%)")
        metric = str(spec.get("metric", "final"))
        if metric not in ("final", "auc") and not metric.startswith("diagnostics."):
            raise UserError(f"{where}: compare[{i}].metric={metric}: final, auc or diagnostics.NAME")
        if spec.get("expect", "greater") not in EXPECT:
            raise UserError(f"{where}: compare[{i}].expect={spec.get('expect')}: greater or less (a than b)")
    study.setdefault("claims", {})
    if not isinstance(study["claims"], dict):
        raise UserError(f"{where}: claims maps a claim id to its text (or {{text:, not_tested: why}})")
    predict = study.setdefault("predict", None)
    if predict is not None and not (isinstance(predict, dict) and isinstance(predict.get("diagnostics"), list)
                                    and set(predict.get("arms", [])) <= set(study["arms"])):
        raise UserError(f"{where}: predict needs diagnostics: [NAME, ...] and optionally arms: (of the study's) "
                        f"and at_fraction:")


def study_root(runs_dir: str, study: Dict[str, Any]) -> str:
    return os.path.abspath(os.path.join(runs_dir, "study", study["name"]))


def run_folder(root: str, arm: str, seed: int) -> str:
    return os.path.join(root, "runs", arm, f"seed_{seed}")


# what a finished run keeps in the archive: everything but these (checkpoints, TensorBoard, videos: large, and
# nothing the report reads; train.log: the study logs each run to logs/<arm>_seed_<s>.log)
NOT_ARCHIVED = archive.NOT_ARCHIVED


def archived_folder(study: Dict[str, Any], arm: str, seed: int) -> Optional[str]:
    """The run's folder in the study's archive, whether it holds the run or not (None: no archive). A packed
    archive (NAME.tar.xz) is read as its unpacked copy (isaac_ppo.lab.archive.unpacked)."""
    if not study["archive"]:
        return None
    where = archive.unpacked(study["archive"]) if archive.is_pack(study["archive"]) else study["archive"]
    return os.path.abspath(os.path.join(where, arm, f"seed_{seed}"))


def finished_folder(root: str, study: Dict[str, Any], arm: str, seed: int) -> Optional[str]:
    """Where the finished run (arm, seed) is read from: the archive, else its run folder; None if unfinished. The
    archive first: it is what git carries, so a report reads the same runs on every checkout."""
    for folder in (archived_folder(study, arm, seed), run_folder(root, arm, seed)):
        if folder and os.path.isfile(os.path.join(folder, DONE)):
            return folder
    return None


def archive_run(folder: str, study: Dict[str, Any], arm: str, seed: int) -> None:
    """Archive a finished run's small files as (arm, seed), replacing an older copy whole: into the pack (a new
    pack with the run in it, renamed over the old one), or into the archive folder (copied aside, then renamed)."""
    if archive.is_pack(study["archive"]):
        archive.add(study["archive"], f"{arm}/seed_{seed}", folder)
        return
    target = archived_folder(study, arm, seed)
    staging = target + ".tmp"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(folder, staging, ignore=NOT_ARCHIVED)
    if os.path.isdir(target):
        shutil.rmtree(target)
    os.replace(staging, target)
