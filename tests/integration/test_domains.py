"""Every key has a domain: a task's parameters are checked against the domains its class declares, no float in a
config may be NaN or infinite, and a run folder that cannot be made is refused before Hydra makes it: one line,
exit 2, no folder. A seeded fuzzer tries bad values on every key of every task's composed config."""
from __future__ import annotations

import math
import os
import random
import subprocess
import sys

import pytest
import torch
from omegaconf import OmegaConf

from isaac_ppo.config import load
from isaac_ppo.config.checks import RANDOMIZATION_KEYS, RUN_DOMAINS
from isaac_ppo.config.compose import compose_config
from isaac_ppo.domains import boolean, check, flat, pair, proportions, real, thresholds
from isaac_ppo.errors import UserError
from isaac_ppo.envs.registry import registered_tasks, spec
from isaac_ppo.tasks.randomization import read_plan

SMALL = ["num_envs=64", "agent.minibatch_size=256", "max_iterations=1", "sim=mujoco"]


@pytest.mark.parametrize("override, message", [
    ("task=Ant task.mujoco.timestep=0", "task.mujoco.timestep=0 is outside its domain: a number in (0, inf)"),
    ("task=Cartpole task.env.maxEffort=-5", "task.env.maxEffort=-5 is outside its domain: a number in (0, inf)"),
    ("task=Cartpole task.env.episodeLength=0", "task.env.episodeLength=0 is outside its domain: an integer in [1, inf)"),
    ("task=Cartpole agent.learning_rate=nan", "agent.learning_rate=nan: a config value must be a finite number"),
    # issue 45's bad input for Anymal: a stiffness that pushes away from the target, an episode of no time, a
    # command range upside down
    ("task=Anymal task.env.control.stiffness=-85",
     "task.env.control.stiffness=-85 is outside its domain: a number in (0, inf)"),
    ("task=Anymal task.env.learn.episodeLength_s=0",
     "task.env.learn.episodeLength_s=0 is outside its domain: a number in (0, inf)"),
    ("task=Anymal task.env.randomCommandVelocityRanges.linear_x=[2.0,-2.0]",
     "task.env.randomCommandVelocityRanges.linear_x=[2.0, -2.0] is outside its domain: a pair [min, max], min <= max, "
     "of numbers in [-5, 5]"),
    # issue 46's bad input for AnymalTerrain: terrain kinds whose shares do not make a whole, a map of no level, a
    # friction range upside down
    ("task=AnymalTerrain task.env.terrain.terrainProportions=[0.5,0.5,0.5,0,0]",
     "task.env.terrain.terrainProportions=[0.5, 0.5, 0.5, 0, 0] is outside its domain: a list of 5 proportions, each "
     ">= 0, summing to 1"),
    ("task=AnymalTerrain task.env.terrain.numLevels=0",
     "task.env.terrain.numLevels=0 is outside its domain: an integer in [1, inf)"),
    ("task=AnymalTerrain task.env.learn.frictionRange=[1.25,0.5]",
     "task.env.learn.frictionRange=[1.25, 0.5] is outside its domain: a pair [min, max], min <= max, of numbers in "
     "(0, 10]"),
    # issue 47: the critic's own observations asked of a task that has none
    ("task=Cartpole asymmetric=true", "asymmetric=true: task=Cartpole has no critic observations"),
    # a critic of its own widths asked of a critic that shares the actor's trunk
    ("task=Cartpole agent.network.critic_hidden=[64,64]",
     "agent.network.critic_hidden=[64, 64] sizes a critic of its own, and this one shares the actor's trunk"),
    # ShadowHand: an observation type IsaacGymEnvs does not have, an object the port has not, a success that needs no turn
    ("task=ShadowHand task.env.observationType=pixels",
     "task.env.observationType='pixels' is outside its domain: one of openai, full_no_vel, full, full_state"),
    ("task=ShadowHand task.env.objectType=egg",
     "task.env.objectType='egg' is outside its domain: one of block"),
    ("task=ShadowHand task.env.successTolerance=0",
     "task.env.successTolerance=0 is outside its domain: a number in (0, inf)"),
    # a threshold of a measure of success: a share above 1; a measure the task does not report
    ("task=FrankaCabinet task.solve_measures.drawer_opened=[0.5,1.5]",
     "task.solve_measures.drawer_opened=[0.5, 1.5] is outside its domain: a list of numbers, each in [0, 1]"),
    ("task=ShadowHand +task.solve_measures.return_mean=[100]",
     "task.solve_measures.return_mean: task ShadowHand has no evaluation measure 'return_mean' to solve by (its "
     "measures with thresholds: successes)"),
    ("task=Ant +task.solve_measures.speed=[1]",
     "task.solve_measures.speed: task Ant has no evaluation measure 'speed' to solve by (it declares none)"),
])
def test_the_reported_cases_are_one_line_before_anything_is_made(tmp_path, override, message):
    with pytest.raises(UserError) as caught:
        compose_config([*override.split(), *SMALL, f"runs_dir={tmp_path / 'runs'}"])
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert not (tmp_path / "runs").exists()


def test_a_run_folder_that_cannot_be_made_is_one_line_and_exit_2(tmp_path):
    """The CLI, as a user types it: /proc refuses folders even to root (access() says yes there)."""
    done = subprocess.run([sys.executable, "-m", "isaac_ppo.train", "task=Cartpole", *SMALL,
                           "hydra.run.dir=/proc/isaac-ppo-test/run"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "isaac-ppo-train: hydra.run.dir=/proc/isaac-ppo-test/run cannot be written (/proc is not writable for this "
        "user): point hydra.run.dir= at a folder you can write"]
    assert os.listdir(tmp_path) == []


def test_a_bad_anymal_value_is_one_line_and_exit_2_before_any_folder(tmp_path):
    """The CLI, as a user types it (issue 45's acceptance): a negative stiffness is one line, exit 2, no run folder."""
    done = subprocess.run([sys.executable, "-m", "isaac_ppo.train", "task=Anymal", *SMALL,
                           "task.env.control.stiffness=-85", f"runs_dir={tmp_path / 'runs'}"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "isaac-ppo-train: task.env.control.stiffness=-85 is outside its domain: a number in (0, inf)"]
    assert os.listdir(tmp_path) == []


def test_terrain_proportions_that_do_not_sum_to_1_are_one_line_and_exit_2_before_any_folder(tmp_path):
    """The CLI, as a user types it (issue 46's acceptance)."""
    done = subprocess.run([sys.executable, "-m", "isaac_ppo.train", "task=AnymalTerrain", *SMALL,
                           "task.env.terrain.terrainProportions=[0.1,0.1,0.35,0.25,0.25]",
                           f"runs_dir={tmp_path / 'runs'}"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "isaac-ppo-train: task.env.terrain.terrainProportions=[0.1, 0.1, 0.35, 0.25, 0.25] is outside its domain: a "
        "list of 5 proportions, each >= 0, summing to 1"]
    assert os.listdir(tmp_path) == []


def test_asymmetric_on_a_task_without_critic_observations_is_one_line_and_exit_2_before_any_folder(tmp_path):
    """The CLI, as a user types it (issue 47's bad input)."""
    done = subprocess.run([sys.executable, "-m", "isaac_ppo.train", "task=Ant", *SMALL, "asymmetric=true",
                           f"runs_dir={tmp_path / 'runs'}"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("isaac-ppo-train: asymmetric=true: task=Ant has no critic "
                                                   "observations"), lines
    assert os.listdir(tmp_path) == []


TASKS = registered_tasks()
SOLVE_MEASURES = {task: sorted(spec(task).solve_measures) for task in TASKS}


def parameter_domains(task):
    return spec(task).parameter_domains()


@pytest.mark.parametrize("task", sorted(t for t, measures in SOLVE_MEASURES.items() if measures))
def test_a_measure_a_task_can_be_solved_by_is_one_its_evaluation_reports(task):
    """Each `solve_measures.NAME` a task declares is a measure or outcome its steps report (what evaluation averages
    into eval.NAME), and its task config sets thresholds for it."""
    from isaac_ppo.envs import make

    env = make(task, 2, sim="mujoco", seed=0)
    env.reset()
    extras = env.step(torch.zeros(2, env.num_actions))[3]
    reported = set(extras.get("measures", {})) | set(extras.get("outcomes", {}))
    assert set(SOLVE_MEASURES[task]) <= reported, (SOLVE_MEASURES[task], sorted(reported))
    declared = OmegaConf.to_container(compose_config([f"task={task}", *SMALL]).task.solve_measures)
    assert sorted(declared) == SOLVE_MEASURES[task] and all(declared.values())


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_parameter_has_a_declared_domain(task):
    values = flat(OmegaConf.to_container(compose_config([f"task={task}"]).task, resolve=True))
    undeclared = {key for key in set(values) - set(parameter_domains(task)) - {"name", "entry_point", "solve_thresholds"}
                  if not key.startswith(RANDOMIZATION_KEYS)}
    assert not undeclared, f"{task}: no domain for {sorted(undeclared)} (declare it in its spec's domains)"
    # IsaacGymEnvs' randomisation block, where the task has one: its own schema, with the task's actors
    block = OmegaConf.to_container(compose_config([f"task={task}"]).task, resolve=True).get("task", {})
    if "randomization_params" in block:
        read_plan(block["randomization_params"], tuple(spec(task).actors))
    # every shipped value inside its domain: what lets the config checks take a task node that is its YAML unchanged
    # without loading the spec (config/checks.py as_shipped)
    check(values, parameter_domains(task), prefix="task.")


# values a user may type, as Hydra's grammar parses them
ALWAYS = ["abc", float("nan"), float("inf"), 0, -1, 1e30]  # wrong type, NaN, infinity, zero, negative, huge
MORE = ["", -float("inf"), 0.0, -0.5, 1, 10**12, 3.5, None, True, "../up", [1.0, -1.0]]


def _set(tree: dict, key: str, value):
    """Set a dotted key in place; returns the value it had (a case puts it back: a deep copy per case cost a
    sixth of the fuzzer's time)."""
    *parents, leaf = key.split(".")
    for part in parents:
        tree = tree[part]
    previous, tree[leaf] = tree[leaf], value
    return previous


@pytest.mark.slow
def test_a_seeded_fuzzer_over_every_key_of_every_task(capsys):
    """Each case goes through the config boundary (config.load: the schemas, every rule, the domains) that the CLI
    runs before any folder exists. Expected: a value outside a declared domain, NaN or an infinity is refused in
    one line naming the key; a value inside is not refused for its own sake; nothing but a UserError is ever
    raised. A key with a declared domain (the task's parameters, the run's RUN_DOMAINS) is fuzzed by its domain's
    kind (its description and the default's type: "a number in (0, inf)", float): the first key of a kind gets the
    six of ALWAYS and one drawn from MORE, which tries every branch of that kind's check through the boundary; each
    further key of the kind gets one value of ALWAYS its domain refuses (that the key is wired to its domain, named
    in the refusal) and one of MORE. (Six of ALWAYS for every key had made the cases grow by 7 a task parameter:
    2,395 over 14 tasks, 267 domain keys of 45 kinds, the suite's slowest test at ~100 s on an AVX2 machine.) Any
    other key gets two drawn from both lists. The run's keys are the same in every task's config: they are fuzzed
    in the first task's only; the others' task.* and agent.* keys each time, but for a key with the same domain and
    default as one already fuzzed."""
    rng = random.Random(43)
    cases = refused = 0
    fuzzed, kinds = set(), set()
    for number, task in enumerate(sorted(TASKS)):
        composed = OmegaConf.to_container(compose_config([f"task={task}", *SMALL]), resolve=True)
        domains = {f"task.{k}": d for k, d in parameter_domains(task).items()}
        if number == 0:
            domains.update(RUN_DOMAINS)
        defaults = flat(composed)
        # the run's keys are the same in every task's config: after the first task, only what the task brings (its
        # parameters and its agent's values) is fuzzed again
        keys = [k for k in defaults if not isinstance(defaults[k], (list, dict))
                and (number == 0 or k.startswith(("task.", "agent.")))
                and (k, domains.get(k), defaults[k]) not in fuzzed]
        # a key another task's config brought with the same domain and default (AnymalTerrain's inherited Anymal
        # keys, an agent value two tasks share) was fuzzed there: the same cases would be tried again
        fuzzed.update((k, domains.get(k), defaults[k]) for k in keys)
        for key in keys:
            numeric = isinstance(defaults[key], (int, float)) and not isinstance(defaults[key], bool)
            kind = (domains[key].describe(), type(defaults[key])) if key in domains else None
            if kind is None:
                candidates = rng.sample(ALWAYS + MORE, 2)
            elif kind not in kinds:
                kinds.add(kind)
                candidates = ALWAYS + rng.sample(MORE, 1)
            else:
                refused_by_it = [v for v in ALWAYS if not domains[key].admits(v)]
                candidates = rng.sample(refused_by_it or ALWAYS, 1) + rng.sample(MORE, 1)
            for value in candidates:
                previous = _set(composed, key, value)
                cases += 1
                try:
                    load(composed)
                except UserError as error:
                    refused += 1
                    text = str(error)
                    assert "\n" not in text, (key, value, text)
                    if key in domains and not domains[key].admits(value):
                        assert key in text.split(":")[0], (key, value, text)  # (the schema's: "config key K: ...")
                    continue
                finally:
                    _set(composed, key, previous)
                non_finite = isinstance(value, float) and not math.isfinite(value)
                assert not (numeric and non_finite), f"{key}={value!r} was accepted"  # (a str key reads "inf")
                if key in domains:
                    assert domains[key].admits(value), f"{key}={value!r} is outside {domains[key].describe()}"
    with capsys.disabled():
        print(f"\n[fuzzer] {cases} cases over every key of {len(TASKS)} tasks' configs ({len(kinds)} kinds of domain),"
              f" {refused} refused in one line")
    assert cases > 1000 and refused > cases // 3


@pytest.mark.parametrize("path, key", [(["seed"], "seed"), (["task", "name"], "task.name"),
                                       (["agent", "network", "hidden", 1], "agent.network.hidden[1]")])
def test_a_missing_value_is_one_line_naming_its_key(path, key):
    """A value left as OmegaConf's "???" (a YAML of one's own that declares a key without filling it) is refused
    with the key's dotted name, a list's element by its index (config/schema.py's walk of the typed config)."""
    composed = OmegaConf.to_container(compose_config(["task=Cartpole", *SMALL]), resolve=True)
    parent = composed
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = "???"
    with pytest.raises(UserError) as caught:
        load(composed)
    assert str(caught.value) == (f"config key {key} is missing: set it in your YAML or on the command line "
                                 f"({key}=...)")


@pytest.mark.parametrize("name", ["../up", "a/b", "..", "."])
def test_an_experiment_name_that_is_not_one_folder_is_refused(tmp_path, name):
    with pytest.raises(UserError) as caught:
        compose_config(["task=Cartpole", *SMALL, f"runs_dir={tmp_path / 'runs'}", f"experiment={name}"])
    assert str(caught.value).startswith(f"experiment={name!r} is outside its domain: one folder name")
    assert not (tmp_path / "runs").exists()


def test_a_domain_describes_its_bounds():
    assert real(0.0, 1.0, low_open=True).describe() == "a number in (0, 1]"
    assert not real(0.0, 1.0, low_open=True).admits(0.0) and real(0.0, 1.0, low_open=True).admits(1.0)
    speeds = pair(-5.0, 5.0)  # (a velocity command's range, as the legged tasks declare theirs)
    assert speeds.describe() == "a pair [min, max], min <= max, of numbers in [-5, 5]"
    assert speeds.admits([-1.0, 1.0]) and speeds.admits([0.5, 0.5])
    for outside in ([1.0, -1.0], [-6.0, 1.0], [0.0], [0.0, float("nan")], 1.0, ["a", "b"]):
        assert not speeds.admits(outside), outside
    kinds = proportions(3)  # (a terrain's kinds: shares of its columns)
    assert kinds.describe() == "a list of 3 proportions, each >= 0, summing to 1"
    assert kinds.admits([0.1, 0.2, 0.7]) and kinds.admits([1, 0, 0])
    for outside in ([0.5, 0.5], [0.5, 0.6, -0.1], [0.2, 0.2, 0.2], [0.5, 0.5, float("nan")], 1.0, ["a", "b", "c"]):
        assert not kinds.admits(outside), outside
    shares = thresholds(0.0, 1.0)  # (a measure of success's levels: FrankaCabinet's drawer_opened)
    assert shares.describe() == "a list of numbers, each in [0, 1]"
    assert shares.admits([0.5, 0.9]) and shares.admits([]) and shares.admits([1])
    for outside in ([0.5, 1.5], [float("nan")], 0.5, ["a"], [True]):
        assert not shares.admits(outside), outside
    frictions = pair(0.0, 10.0, low_open=True)  # (MuJoCo Warp gives NaN for a friction of exactly 0)
    assert not frictions.admits([0.0, 1.0]) and frictions.admits([0.5, 1.25])
    switch = boolean()  # (task.mujoco.refsafe: a number where a switch is meant is refused, not read as one)
    assert switch.describe() == "true or false" and switch.admits(False) and switch.admits(True)
    for outside in (0, 1, "false", None):
        assert not switch.admits(outside), outside
