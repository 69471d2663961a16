"""The registry of task ports (isaac_ppo/envs/registry.py): what it reads from a task YAML and a spec, the one-line
refusals of a task YAML that names no class or the wrong one, and the docs' task table kept to it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from isaac_ppo.envs import make, registry
from isaac_ppo.errors import UserError

DOCS_TASKS = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"


def test_every_registered_task_names_its_class_and_its_spec_names_it_back():
    names = registry.registered_tasks()
    assert len(names) >= 8 and names == sorted(names)
    for name in names:
        spec = registry.spec(name)
        assert spec.name == name and spec.reward_terms, name
        assert (Path(registry.task_class(name).asset_path())).is_file(), f"{name}: its MJCF {spec.model} is missing"


def registry_cfg(name: str) -> dict:
    from omegaconf import OmegaConf

    from isaac_ppo.envs.make import load_task_config

    return OmegaConf.to_container(load_task_config(name))


@pytest.mark.parametrize("entry,fragment", [
    ("../up", "must name a class as package.module:Class"),
    ("no_such_package.tasks:Pole", "cannot import no_such_package.tasks"),
    ("isaac_ppo.tasks.classic.cartpole:Nothing", "name a task class (module:Class) whose `spec` is a TaskSpec"),
    ("isaac_ppo.tasks.locomotion.ant:Ant", "declares task 'Ant', not 'Cartpole'"),
])
def test_a_task_yaml_naming_no_task_class_is_one_line(entry, fragment):
    with pytest.raises(UserError, match=re.escape(fragment)):
        make("Cartpole", 2, sim="mujoco", task_cfg=dict(registry_cfg("Cartpole"), entry_point=entry))


def test_a_task_of_isaacgymenvs_without_a_port_is_refused_on_mujoco_saying_how_to_register_one():
    cfg = registry_cfg("Cartpole")
    cfg.pop("entry_point")
    cfg["name"] = "Trifinger"
    with pytest.raises(UserError, match="no MuJoCo port .* entry_point: package.module:Class"):
        make("Trifinger", 2, sim="mujoco", task_cfg=cfg)


def test_the_docs_task_table_lists_every_registered_task_with_its_sizes():
    """docs/tasks.md's table (task | family | what | obs | act | critic observations | backends) against the
    registry: the same tasks, and each one's observation and action sizes as its env has them."""
    rows = {}
    for line in DOCS_TASKS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0] not in ("task", "") and not cells[0].startswith("---"):
            rows[cells[0]] = cells
    assert sorted(rows) == registry.registered_tasks()
    for name, cells in rows.items():
        env = make(name, 1, sim="mujoco")
        assert int(re.match(r"\d+", cells[3]).group()) == env.num_obs, name
        assert int(cells[4]) == env.num_actions, name
        spec = registry.spec(name)
        assert (cells[5] == "none") == (not spec.critic_observations), name
