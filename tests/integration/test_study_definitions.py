"""Every study shipped in cfg/study/ is valid before it runs: a study of ten hours must not find a typo in its
seventh arm. Each definition loads (arms, seeds, stop, compare, predict, claims, archive checked), and each arm's
overrides, with the study's common ones and a seed, compose into a config that isaac-ppo-train would accept."""
from __future__ import annotations

import os

import pytest

from isaac_ppo.config.files import cfg_dir
from isaac_ppo.study import load_study
from isaac_ppo.train import compose_config

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
