"""Every study shipped in cfg/study/ is valid before it runs: a study of ten hours must not find a typo in its
seventh arm. Each definition loads (arms, seeds, stop, compare, predict, claims, archive checked), and each arm's
overrides, with the study's common ones and a seed, compose into a config that isaac-ppo-train would accept."""
from __future__ import annotations

import os
import subprocess

import pytest

from isaac_ppo.config.files import cfg_dir
from isaac_ppo.lab.archive import is_pack, read
from isaac_ppo.lab.study_definition import load_study
from isaac_ppo.config.compose import compose_config

STUDIES = sorted(name[:-5] for name in os.listdir(cfg_dir("study")) if name.endswith(".yaml"))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_shipped_studies_include_the_paper_study():
    assert {"paper_ant", "paper_ant_pilot", "cartpole_toy"} <= set(STUDIES)


@pytest.mark.parametrize("name", STUDIES)
def test_a_shipped_study_loads_and_every_arm_composes(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # (paths in a study, e.g. a probe set, are relative to the checkout, as run from it)
    study = load_study(name)
    for arm, overrides in study["arms"].items():
        cfg = compose_config(study["common"] + overrides + [f"seed={study['seeds'][0]}"])
        assert cfg.seed == study["seeds"][0], arm
        probe = cfg.diagnostics.probe_set
        assert not probe or os.path.isfile(probe), f"{name}.{arm}: diagnostics.probe_set={probe} is not in the checkout"


@pytest.mark.parametrize("name", STUDIES)
def test_a_shipped_study_s_archive_is_carried_by_git(name):
    """An archive git ignores keeps nothing from one machine to the next (paper_ant's `.../runs/` was, under a
    `runs/` pattern meant for the checkout's own runs folder)."""
    archive = load_study(name)["archive"]
    if not archive:
        pytest.skip(f"{name} keeps no archive")
    if not os.path.isdir(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    probe = archive if is_pack(archive) else os.path.join(archive, "some_arm", "seed_0", "metrics.jsonl")
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", probe], cwd=ROOT)
    assert ignored.returncode == 1, f"{name}: git ignores its archive {archive}: fix .gitignore"


@pytest.mark.parametrize("name", STUDIES)
def test_a_shipped_study_s_archive_holds_finished_runs_of_its_own_arms_and_seeds(name):
    """What the archive holds is what `run` skips and `report` reads: every run in it is one of the study's (arm,
    seed) with its study_done.json and rows; a pack (NAME.tar.xz: what the shipped studies keep) reads whole."""
    study = load_study(name)
    if not study["archive"]:
        pytest.skip(f"{name} keeps no archive")
    path = os.path.join(ROOT, study["archive"])
    if not os.path.exists(path):
        pytest.skip(f"{name}: its archive {study['archive']} is not in this checkout (no run finished yet)")
    assert is_pack(path), f"{name}: a shipped archive is a pack (python -m isaac_ppo.lab.archive pack FOLDER)"
    files = read(path)
    runs = {tuple(member.split("/")[:2]) for member in files}
    expected = {(arm, f"seed_{seed}") for arm in study["arms"] for seed in study["seeds"]}
    assert runs and runs <= expected, f"{name}: runs not of the study: {sorted(runs - expected)}"
    for arm, seed in runs:
        for needed in ("study_done.json", "metrics.jsonl", "metrics.json", "config.yaml", ".hydra/overrides.yaml"):
            assert f"{arm}/{seed}/{needed}" in files, f"{name}: {arm}/{seed} lacks {needed}"
