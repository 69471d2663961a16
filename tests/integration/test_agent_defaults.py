"""The agent's keys are declared once (config/schema.py: type, default, domain, meaning); a task's agent YAML holds
only what the task sets; an IsaacGymEnvs-style full YAML, every key written out, still loads to the same values and
trains."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import MISSING, OmegaConf

import isaac_ppo.cfg
from isaac_ppo.config.compose import compose_config
from isaac_ppo.config.schema import AgentConfig, NetworkConfig, RnnConfig, agent_domains
from isaac_ppo.domains import flat

AGENTS = Path(isaac_ppo.cfg.__file__).parent / "agent"


def _defaults() -> dict:
    found = {}
    for prefix, cls in (("", AgentConfig), ("network.", NetworkConfig), ("network.rnn.", RnnConfig),
                        ("network.critic_rnn.", RnnConfig)):
        for field in dataclasses.fields(cls):
            if field.name not in ("network", "rnn", "critic_rnn"):  # (nodes: their keys are listed one by one)
                found[prefix + field.name] = field.default
    return found


@pytest.mark.parametrize("path", sorted(AGENTS.glob("*.yaml")), ids=lambda p: p.stem)
def test_an_agent_yaml_holds_only_what_its_task_sets(path):
    defaults = _defaults()
    written = flat({k: v for k, v in yaml.safe_load(path.read_text()).items() if k != "defaults"})
    assert not set(written) - set(defaults), f"{path.name}: keys the schema does not declare"
    at_default = [k for k, v in written.items() if k != "name" and defaults[k] is not MISSING and defaults[k] == v]
    assert not at_default, f"{path.name} repeats the defaults of {at_default}: drop them"
    required = [k for k, v in defaults.items() if v is MISSING]
    assert set(required) <= set(written), f"{path.name} lacks required keys {sorted(set(required) - set(written))}"


def test_every_agent_key_declares_its_meaning_and_every_number_its_domain():
    for cls in (AgentConfig, NetworkConfig, RnnConfig):
        for field in dataclasses.fields(cls):
            if field.name == "network":
                continue
            assert field.metadata.get("meaning"), f"{cls.__name__}.{field.name} says nothing of what it means"
    numbers = [f"agent.{f.name}" for f in dataclasses.fields(AgentConfig) if f.type in ("int", "float")]
    assert set(numbers) <= set(agent_domains()), sorted(set(numbers) - set(agent_domains()))


def _full_yaml(folder: Path, task: str) -> str:
    """An IsaacGymEnvs-style agent YAML for task: every key written out, no defaults list (as the package's YAMLs
    were until the defaults moved into the schema), under folder/agent/<task>FullPPO.yaml. Returns its name."""
    agent = OmegaConf.to_container(compose_config([f"task={task}"]).agent, resolve=True)
    agent["name"] = f"{task}FullPPO"
    (folder / "agent").mkdir(parents=True, exist_ok=True)
    (folder / "agent" / f"{task}FullPPO.yaml").write_text(yaml.safe_dump(agent, sort_keys=False))
    return agent["name"]


@pytest.mark.parametrize("task", ["Ant", "ShadowHand"])
def test_a_full_yaml_loads_to_the_same_values_as_the_tasks_own(tmp_path, task):
    name = _full_yaml(tmp_path, task)
    searchpath = f"hydra.searchpath=[file://{tmp_path}]"
    full = OmegaConf.to_container(compose_config([f"task={task}", f"agent={name}", searchpath]).agent)
    own = OmegaConf.to_container(compose_config([f"task={task}"]).agent)
    assert {**full, "name": None} == {**own, "name": None}
    assert "defaults" not in yaml.safe_load((tmp_path / "agent" / f"{name}.yaml").read_text())


def test_a_key_the_tasks_yaml_leaves_to_its_default_can_be_overridden():
    assert "gamma" not in (AGENTS / "AntPPO.yaml").read_text()
    assert compose_config(["task=Ant", "agent.gamma=0.98"]).agent.gamma == 0.98


@pytest.mark.slow
def test_a_full_yaml_trains(tmp_path):
    name = _full_yaml(tmp_path / "cfg", "Cartpole")
    done = subprocess.run([sys.executable, "-m", "isaac_ppo.train", "task=Cartpole", f"train={name}",
                           f"hydra.searchpath=[file://{tmp_path / 'cfg'}]", "num_envs=64", "max_iterations=2",
                           "agent.minibatch_size=512", "diagnostics=off", "eval.num_envs=4",
                           f"runs_dir={tmp_path / 'runs'}"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    config = next((tmp_path / "runs").rglob("config.yaml"))
    assert OmegaConf.load(config).agent.name == name
