"""A task is four files: a toy task written to a temporary folder (its module with its spec, its MJCF, its task YAML
naming the class, its agent YAML) and nothing else is picked up by make(), the config checks (an out-of-domain
value refused in one line), the CLI (trains and plays it through hydra.searchpath), the contract suite and the gait
check, with no edit inside isaac-ppo. This is the walk-through of docs/adding-a-task.md, as a user would do it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import one_line_error

MODULE = '''"""Slider: a cart on a rail is pushed back to the middle (obs 2, act 1): the smallest task of one's own."""
from __future__ import annotations

from typing import Tuple

import torch

from isaac_ppo.domains import positive
from isaac_ppo.envs.registry import Gait, TaskSpec
from isaac_ppo.tasks.base import MujocoTask, Selection


class Slider(MujocoTask):
    spec = TaskSpec(
        name="Slider", model="assets/slider.xml",
        domains={"env.maxForce": positive(), "env.resetDist": positive()},  # (a force below 0 turns the motor round)
        reward_terms=("centred", "off_rail"),
        gait=Gait("measures", ("distance_m",)),
    )
    num_obs = 2
    num_actions = 1

    def configure_model(self, model) -> None:
        model.actuator_gear[0, 0] = float(self.cfg["env"]["maxForce"])

    def setup(self) -> None:
        self.reset_dist = float(self.cfg["env"]["resetDist"])

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        return torch.stack((self.qpos[sel, 0], self.qvel[sel, 0]), dim=1).float()

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        distance = obs[:, 0].abs()
        off = distance > self.reset_dist
        self.reward_terms = {"centred": torch.where(off, torch.zeros_like(distance), 1.0 - distance),
                             "off_rail": -2.0 * off.float()}
        self.measures = {"distance_m": distance}
        return self.reward_terms["centred"] + self.reward_terms["off_rail"], off

    def make_terminal(self, ids: Selection) -> None:
        self.qpos[ids, 0] = 0.99  # at the rail's end, and leaving
        self.qvel[ids, 0] = 5.0

    def reset_state(self, ids: torch.Tensor) -> None:
        start = torch.rand(ids.numel(), 1, generator=self.generator, dtype=torch.float64, device=self.sim_device)
        self.qpos[ids] = (start - 0.5).to(self.qpos.dtype)
        self.qvel[ids] = 0.0
'''

MODEL = """<mujoco model="slider">
  <option timestep="0.01"/>
  <worldbody>
    <body name="cart">
      <joint name="rail" type="slide" axis="1 0 0" limited="true" range="-2 2"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="rail" gear="10"/></actuator>
</mujoco>
"""

TASK_YAML = """name: Slider
entry_point: slider_task.slider:Slider
env:
  numEnvs: 64
  episodeLength: 100
  maxForce: 10.0
  resetDist: 0.9
  clipObservations: 5.0
  clipActions: 1.0
sim:
  dt: 0.02
  substeps: 2
mujoco:
  timestep: 0.01
  substeps: 2
  nthread: 1
  max_abs_qvel: 1000.0
  max_abs_reward: 100.0
  nconmax: 1
  njmax: 4
solve_thresholds: [80]
"""


def write_task(root: Path) -> Path:
    """The four files, under root: slider_task/slider.py, slider_task/assets/slider.xml, cfg/task/Slider.yaml and
    cfg/agent/SliderPPO.yaml (the package's own CartpolePPO's values, as a user copies one). Returns cfg/."""
    package = root / "slider_task"
    (package / "assets").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "slider.py").write_text(MODULE)
    (package / "assets" / "slider.xml").write_text(MODEL)
    cfg = root / "cfg"
    (cfg / "task").mkdir(parents=True)
    (cfg / "agent").mkdir()
    (cfg / "task" / "Slider.yaml").write_text(TASK_YAML)
    import isaac_ppo.cfg

    agent = Path(isaac_ppo.cfg.__file__).parent / "agent" / "CartpolePPO.yaml"
    (cfg / "agent" / "SliderPPO.yaml").write_text(agent.read_text().replace("CartpolePPO", "SliderPPO"))
    return cfg


@pytest.fixture
def slider(tmp_path, monkeypatch):
    cfg = write_task(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ISAAC_PPO_TASK_PATH", str(cfg / "task"))
    return tmp_path


def _environment(root: Path) -> dict:
    env = dict(os.environ, ISAAC_PPO_TASK_PATH=str(root / "cfg" / "task"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return env


def test_make_and_the_registry_pick_it_up(slider):
    from isaac_ppo.envs import make, registry

    assert "Slider" in registry.registered_tasks() and registry.spec("Slider").reward_terms == ("centred", "off_rail")
    env = make("Slider", 4, sim="mujoco", seed=0)
    obs = env.reset()["obs"]
    _, reward, resets, extras = env.step(torch.zeros(4, 1))
    assert obs.shape == (4, 2) and reward.shape == (4,) and not resets.any()
    torch.testing.assert_close(reward, 1.0 - obs[:, 0].abs(), rtol=0, atol=0.05)  # (the cart hardly moved)
    env.make_terminal(2)
    _, reward, resets, extras = env.step(torch.zeros(4, 1))
    assert resets.tolist() == [False, False, True, False] and reward[2].item() == -2.0


@pytest.mark.slow
def test_the_cli_refuses_its_out_of_domain_value_in_one_line_then_trains_and_plays_it(slider, tmp_path):
    searchpath = f"hydra.searchpath=[file://{slider / 'cfg'}]"
    common = [sys.executable, "-m", "isaac_ppo.train", searchpath, "task=Slider", "sim=mujoco",
              f"runs_dir={tmp_path / 'runs'}", "num_envs=64", "agent.minibatch_size=512", "diagnostics=off"]
    env = _environment(slider)
    refused = subprocess.run(common + ["task.env.maxForce=-1"], capture_output=True, text=True, env=env,
                             cwd=tmp_path, timeout=120)
    one_line_error(refused, "task.env.maxForce=-1")
    assert not (tmp_path / "runs").exists()
    done = subprocess.run(common + ["max_iterations=2", "eval.num_envs=4", "experiment=slider"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    last = next((tmp_path / "runs").rglob("last.pt"))
    played = subprocess.run([sys.executable, "-m", "isaac_ppo.train", searchpath, "task=Slider", "sim=mujoco",
                             "test=true", f"checkpoint={last}", "play_episodes=2", "num_envs=2"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert played.returncode == 0, played.stderr[-2000:]

    # the gait check reads the run's config.yaml (its entry_point) and measures the spec's measures
    from isaac_ppo.lab.gait import check

    for refine in (1, 2):
        gait = check(str(last), "Slider", envs=4, steps=30, refine=refine)
        assert 0 <= gait["distance_m_mean"] <= 0.9 and 0 <= gait["terminal_env_fraction"] <= 1
        assert gait["diverged"] == 0


@pytest.mark.slow
def test_the_contract_suite_runs_on_it(slider):
    """The contract suite, as its own pytest run with ISAAC_PPO_TASK_PATH naming the toy's folder: every contract
    test gets a Slider case (sim=mujoco here: its MuJoCo Warp case would compile kernels for one more model)."""
    suite = Path(__file__).parent / "test_backend_contract.py"
    done = subprocess.run([sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider", "-n", "0",
                           "-k", "mujoco-Slider", f"--rootdir={suite.parents[1]}"], capture_output=True, text=True,
                          env=_environment(slider), cwd=suite.parents[1], timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " 8 passed" in done.stdout or "8 passed" in done.stdout.splitlines()[-1], done.stdout[-1000:]
