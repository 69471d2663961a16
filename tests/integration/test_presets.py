"""cfg/preset/: every run of every paper-comparison sweep composes and passes validation on Ant."""
from __future__ import annotations

import itertools
import os

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

import isaac_ppo.cfg
from isaac_ppo.config.compose import compose_config

PRESETS = sorted(f[:-5] for f in os.listdir(os.path.join(os.path.dirname(isaac_ppo.cfg.__file__), "preset")))


def sweep_of(preset):
    """The preset's hydra.sweeper.params as lists of overrides, one list per run of the sweep."""
    try:
        with initialize_config_module(config_module="isaac_ppo.cfg", version_base=None):
            cfg = compose(config_name="config", overrides=[f"preset={preset}"], return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()
    params = cfg.hydra.sweeper.params
    assert str(params.seed) == "0,1,2,3,4"  # the paper's five seeds; validity does not depend on them
    axes = [[f"{key}={value}" for value in str(values).split(",")] for key, values in params.items() if key != "seed"]
    return [list(run) for run in itertools.product(*axes)]


def test_the_paper_comparisons_are_all_there():
    assert PRESETS == ["epochs_vs_envs", "fixed_batch_splits", "grow_batch_by_envs", "grow_batch_by_rollout",
                       "more_epochs", "shared_vs_separate"]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("task, budget", [("Ant", 500 * 4096 * 16), ("Humanoid", 1000 * 4096 * 32)])
def test_every_run_of_the_sweep_is_a_valid_config_at_the_tasks_budget(preset, task, budget):
    runs = sweep_of(preset)
    assert len(runs) >= 2
    for run in runs:
        cfg = compose_config([f"task={task}", f"preset={preset}", *run])  # validate() checks every plan
        assert cfg.experiment == preset and cfg.max_env_steps == budget


def test_fixed_batch_splits_hold_the_batch_and_vary_the_split():
    from isaac_ppo.scheduler import build_scheduler

    for task, batch in (("Ant", 65536), ("Humanoid", 131072)):
        splits = []
        for run in sweep_of("fixed_batch_splits"):
            plan = build_scheduler(compose_config([f"task={task}", "preset=fixed_batch_splits", *run])).plan(0, [])
            assert plan.batch_size == batch
            splits.append((plan.num_envs, plan.rollout_length))
        assert splits == [(n, batch // n) for n in (256, 512, 1024, 2048, 4096)]


def test_growing_by_envs_and_by_rollout_visit_the_same_batches():
    from isaac_ppo.scheduler import build_scheduler

    def plans(preset):
        return [build_scheduler(compose_config(["task=Ant", f"preset={preset}", *run])).plan(0, [])
                for run in sweep_of(preset)]

    by_envs, by_rollout = plans("grow_batch_by_envs"), plans("grow_batch_by_rollout")
    assert [p.batch_size for p in by_envs] == [p.batch_size for p in by_rollout] == [16384, 32768, 65536, 131072]
    assert {p.rollout_length for p in by_envs} == {16} and {p.num_envs for p in by_rollout} == {1024}


def test_the_run_name_override_still_works_beside_presets():
    """`experiment=NAME` names the run (IsaacGymEnvs): this is why presets are a group named `preset`."""
    assert compose_config(["experiment=my_run"]).experiment == "my_run"
    assert compose_config(["preset=more_epochs", "experiment=mine"]).experiment == "mine"


PROFILE_TASKS = os.path.join(os.path.dirname(isaac_ppo.cfg.__file__), "profile", "task")


@pytest.mark.parametrize("name", sorted(f[:-5] for f in os.listdir(PROFILE_TASKS) if f.endswith(".yaml")))
def test_a_machine_profile_sets_its_values_records_its_name_and_yields_to_overrides(name):
    """profile=P task=T composes cfg/profile/task/P_T.yaml over the task's defaults (an explicit override, never
    chosen by detecting the hardware); config.yaml then holds profile=P and the values; the user's own overrides
    still win; without it the task keeps IsaacGymEnvs' values."""
    from omegaconf import OmegaConf

    profile, task = name.split("_", 1)
    values = OmegaConf.load(os.path.join(PROFILE_TASKS, f"{name}.yaml"))
    flat = {f"{k}": v for k, v in _flat(OmegaConf.to_container(values))}
    cfg = compose_config([f"task={task}", f"profile={profile}"])
    plain = compose_config([f"task={task}"])
    assert cfg.profile == profile and plain.profile == "none"
    for key, value in flat.items():
        assert OmegaConf.select(cfg, key) == value, key
    assert any(OmegaConf.select(plain, key) != value for key, value in flat.items())
    first = next(iter(flat))
    assert OmegaConf.select(compose_config([f"task={task}", f"profile={profile}", f"{first}=7"]), first) == 7


def test_a_profile_without_values_for_the_task_is_refused_in_one_line(tmp_path, monkeypatch):
    from isaac_ppo.config import files
    from isaac_ppo.config.checks import check_profile
    from isaac_ppo.errors import UserError

    has = sorted(f[len("cpu_"):-5] for f in os.listdir(PROFILE_TASKS) if f.startswith("cpu_"))
    with pytest.raises(UserError, match=rf"^profile=cpu has no settings for task=Walker \(it has: {', '.join(has)}\)"):
        check_profile("cpu", "Walker")
    check_profile("none", "Walker")  # no profile: nothing to look for
    # the CLI's path: composed, then refused before anything is built (every shipped task has cpu settings now,
    # so the profile folder the check reads is one that lacks Humanoid's)
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "cpu_Ant.yaml").write_text("num_envs: 512\n")
    monkeypatch.setattr(files, "cfg_dir", lambda group: str(tmp_path))
    with pytest.raises(UserError, match=r"^profile=cpu has no settings for task=Humanoid \(it has: Ant\)"):
        compose_config(["task=Humanoid", "profile=cpu"])


def _flat(tree, prefix=""):
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _flat(value, path)
        else:
            yield path, value
