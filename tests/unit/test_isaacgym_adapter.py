"""The Isaac Gym adapter against a small fake of IsaacGymEnvs' VecTask (Isaac Gym cannot be installed here)."""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types

import pytest
import torch

from isaac_ppo.envs import isaacgym as isaacgym_backend
from isaac_ppo.envs import make
from isaac_ppo.envs.isaacgym import IsaacGymVecEnv
from isaac_ppo.errors import InputError, UserError

# isaac_ppo.envs.make is the function (re-exported by the package), so fetch the module by name
make_module = importlib.import_module("isaac_ppo.envs.make")


class FakeVecTask:
    """What IsaacGymEnvs' VecTask does, in miniature.

    - actions are clamped to [-1, 1] (clipActions);
    - envs flagged on the previous step are reset inside this step (reset_buf starts as ones, so the first step
      resets every env), after progress_buf += 1, as IsaacGymEnvs' post_physics_step does;
    - an env ends by time-out when progress >= max_episode_length - 1, or by a terminal state when its first
      (clamped) action is 1;
    - obs = (progress, env id); reward = mean of the clamped actions of the env.
    """

    def __init__(self, num_envs=4, num_acts=2, max_episode_length=5):
        self.num_envs = num_envs
        self.num_obs = 2
        self.num_acts = num_acts
        self.rl_device = "cpu"
        self.max_episode_length = max_episode_length
        self.progress_buf = torch.zeros(num_envs, dtype=torch.long)
        self.reset_buf = torch.ones(num_envs, dtype=torch.long)
        self.received = []  # the actions each step() call got
        self.reset_calls = 0

    def _obs(self):
        return torch.stack([self.progress_buf.float(), torch.arange(self.num_envs, dtype=torch.float32)], dim=1)

    def reset(self):
        self.reset_calls += 1
        return {"obs": self._obs()}

    def step(self, actions):
        self.received.append(actions.clone())
        actions = torch.clamp(actions, -1.0, 1.0)
        self.progress_buf += 1
        env_ids = self.reset_buf.nonzero().flatten()
        if len(env_ids) > 0:
            self.progress_buf[env_ids] = 0
        rew = actions.mean(dim=1)
        terminal = actions[:, 0] >= 1.0
        timed_out = self.progress_buf >= self.max_episode_length - 1
        self.reset_buf = (terminal | timed_out).to(torch.long)
        time_outs = (self.progress_buf >= self.max_episode_length - 1) & (self.reset_buf != 0)
        return {"obs": self._obs()}, rew, self.reset_buf.clone(), {"time_outs": time_outs}


@pytest.fixture
def fake():
    return FakeVecTask()


@pytest.fixture
def env(fake):
    return IsaacGymVecEnv(fake)


# ---------------------------------------------------------------------------------------------- the adapter


def test_attributes_mapped(env):
    assert env.num_envs == 4
    assert env.num_obs == 2
    assert env.num_actions == 2  # from num_acts
    assert env.device == torch.device("cpu")  # from rl_device
    assert isinstance(env.device, torch.device)
    assert env.max_episode_length == 5
    assert not hasattr(FakeVecTask(), "num_actions")


def test_reset_returns_pool_obs(env, fake):
    obs = env.reset()["obs"]
    assert fake.reset_calls == 1
    assert obs.shape == (4, 2)
    assert obs[:, 1].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_step_types_and_no_final_obs(env):
    env.reset()
    obs_dict, rew, resets, extras = env.step(torch.full((4, 2), 0.5))
    obs = obs_dict["obs"]
    assert obs.shape == (4, 2)
    assert rew.shape == (4,)
    assert rew.tolist() == [0.5] * 4
    assert resets.dtype == torch.bool
    assert resets.shape == (4,)
    assert extras["time_outs"].dtype == torch.bool
    assert extras["time_outs"].shape == (4,)
    # the obs returned with a reset flag is the terminal one: no final_obs, the collector bootstraps from obs
    assert "final_obs" not in extras


def test_actions_reach_vectask_unclipped(env, fake):
    """Clipping is the VecTask's job (clipActions): the adapter passes the actions through."""
    env.reset()
    actions = torch.tensor([[5.0, -5.0], [0.25, 0.75], [-3.0, -3.0], [0.0, 0.0]])
    _, rew, _, _ = env.step(actions)
    assert torch.equal(fake.received[0], actions)
    assert rew.tolist() == [0.0, 0.5, -1.0, 0.0]


def test_time_outs_at_the_right_steps(env):
    env.reset()
    zeros = torch.zeros(4, 2)
    timeout_steps, reset_steps, progress_at_timeout = [], [], []
    for t in range(1, 13):
        obs_dict, _, resets, extras = env.step(zeros)
        if extras["time_outs"].all():
            timeout_steps.append(t)
            progress_at_timeout.append(obs_dict["obs"][0, 0].item())
        else:
            assert not extras["time_outs"].any()
        if resets.all():
            reset_steps.append(t)
        else:
            assert not resets.any()
        assert "final_obs" not in extras
    # step 1 resets the initial ones; progress runs 0..4 and step 5 returns the terminal obs, then every 5 steps
    assert timeout_steps == [5, 10]
    assert reset_steps == [5, 10]
    assert progress_at_timeout == [4.0, 4.0]


def test_terminal_reset_is_not_a_time_out(env):
    env.reset()
    actions = torch.zeros(4, 2)
    actions[2, 0] = 1.0  # env 2 reaches a terminal state
    _, _, resets, extras = env.step(actions)
    assert resets.tolist() == [False, False, True, False]
    assert extras["time_outs"].tolist() == [False, False, False, False]
    # the next step resets env 2 inside the VecTask: its progress starts over
    obs = env.step(torch.zeros(4, 2))[0]["obs"]
    assert obs[:, 0].tolist() == [1.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("shape", [(8,), (3, 2), (5, 2), (4, 3), (4, 1), (4, 2, 1)])
def test_wrong_shape_refused_before_vectask(env, fake, shape):
    env.reset()
    with pytest.raises(InputError) as info:
        env.step(torch.zeros(shape))
    assert "(4, 2)" in str(info.value)
    assert fake.received == []


def test_nonfinite_refused_before_vectask(env, fake):
    env.reset()
    actions = torch.zeros(4, 2)
    actions[1, 1] = float("nan")
    actions[3, 0] = float("inf")
    with pytest.raises(InputError) as info:
        env.step(actions)
    assert str(info.value).endswith("env ids: 1, 3")
    assert fake.received == []


def test_set_active_pads_and_slices(env, fake):
    env.reset()
    obs = env.set_active(2)["obs"]
    assert obs.shape == (2, 2)
    assert obs[:, 1].tolist() == [0.0, 1.0]
    actions = torch.tensor([[0.5, 0.25], [-0.5, 1.0]])
    obs_dict, rew, resets, extras = env.step(actions)
    # the fake got the whole pool: the active rows, then zeros
    assert len(fake.received) == 1
    got = fake.received[0]
    assert got.shape == (4, 2)
    assert torch.equal(got[:2], actions)
    assert torch.equal(got[2:], torch.zeros(2, 2))
    # and n rows come back
    assert obs_dict["obs"].shape == (2, 2)
    assert obs_dict["obs"][:, 1].tolist() == [0.0, 1.0]
    assert rew.shape == (2,)
    assert rew.tolist() == [0.375, 0.25]
    assert resets.shape == (2,) and resets.dtype == torch.bool
    assert extras["time_outs"].shape == (2,) and extras["time_outs"].dtype == torch.bool
    assert "final_obs" not in extras


def test_set_active_refuses_full_pool_actions(env, fake):
    env.reset()
    env.set_active(3)
    with pytest.raises(InputError) as info:
        env.step(torch.zeros(4, 2))
    assert "(3, 2)" in str(info.value)
    assert fake.received == []


def test_set_active_before_reset_resets(env, fake):
    obs = env.set_active(3)["obs"]
    assert fake.reset_calls == 1
    assert obs.shape == (3, 2)
    assert env.reset()["obs"].shape == (3, 2)


def test_set_active_back_to_full_pool(env, fake):
    env.reset()
    env.set_active(1)
    env.step(torch.zeros(1, 2))
    obs = env.set_active(4)["obs"]
    assert obs.shape == (4, 2)
    _, rew, _, _ = env.step(torch.ones(4, 2) * 0.5)
    assert rew.shape == (4,)
    assert torch.equal(fake.received[-1], torch.ones(4, 2) * 0.5)


@pytest.mark.parametrize("n", [0, 5, -1, True])
def test_set_active_out_of_range(env, n):
    env.reset()
    with pytest.raises(InputError):
        env.set_active(n)
    assert env.active == 4


# ----------------------------------------------------------------------------------- make_env / make(sim=...)


# IsaacGymEnvs' config, in miniature but in its own form: the device keys at the top, the task's numEnvs and
# pipeline flags interpolated from them (as isaacgymenvs/cfg/config.yaml and task/Ant.yaml do)
FAKE_CONFIG = """
task_name: ${task.name}
num_envs: ''
seed: 42
pipeline: gpu
sim_device: cuda:0
rl_device: cuda:0
graphics_device_id: 0
defaults:
  - task: Ant
  - _self_
"""
FAKE_TASK = """
name: {name}
env:
  numEnvs: ${{resolve_default:4096,${{...num_envs}}}}
  episodeLength: 1000
  powerScale: 1.0
  headingWeight: 0.5
sim:
  dt: 0.0166
  substeps: 2
  use_gpu_pipeline: ${{eq:${{...pipeline}},"gpu"}}
  physx:
    use_gpu: ${{contains:"cuda",${{....sim_device}}}}
task:
  randomize: false
"""
# IsaacGymEnvs' Anymal.yaml in miniature: its nested keys (control, learn, command ranges) as there
FAKE_ANYMAL_TASK = """
name: Anymal
env:
  numEnvs: ${resolve_default:4096,${...num_envs}}
  clipObservations: 5.0
  randomCommandVelocityRanges:
    linear_x: [-2., 2.]
    linear_y: [-1., 1.]
    yaw: [-1., 1.]
  control:
    stiffness: 85.0
    damping: 2.0
    actionScale: 0.5
    controlFrequencyInv: 1
  learn:
    torqueRewardScale: -0.000025
    episodeLength_s: 50
sim:
  dt: 0.02
  substeps: 2
task:
  randomize: False
"""
# IsaacGymEnvs' FrankaCabinet.yaml in miniature (its keys as there; the port leaves out startPositionNoise,
# startRotationNoise, aggregateMode, enableDebugVis and asset, which keep IsaacGymEnvs' values)
FAKE_FRANKA_CABINET_TASK = """
name: FrankaCabinet
env:
  numEnvs: ${resolve_default:4096,${...num_envs}}
  envSpacing: 1.5
  episodeLength: 500
  enableDebugVis: False
  clipObservations: 5.0
  clipActions: 1.0
  startPositionNoise: 0.0
  startRotationNoise: 0.0
  numProps: 16
  aggregateMode: 3
  actionScale: 7.5
  dofVelocityScale: 0.1
  distRewardScale: 2.0
  rotRewardScale: 0.5
  aroundHandleRewardScale: 0.25
  openRewardScale: 7.5
  fingerDistRewardScale: 5.0
  actionPenaltyScale: 0.01
sim:
  dt: 0.0166
  substeps: 1
task:
  randomize: False
"""
# IsaacGymEnvs' ShadowHand.yaml in miniature (its keys as there; the port leaves out envSpacing's grid, the random
# forces and asset, which keep IsaacGymEnvs' values)
FAKE_SHADOW_HAND_TASK = """
name: ShadowHand
env:
  numEnvs: ${resolve_default:16384,${...num_envs}}
  envSpacing: 0.75
  episodeLength: 600
  useRelativeControl: False
  dofSpeedScale: 20.0
  actionsMovingAverage: 1.0
  controlFrequencyInv: 1
  forceScale: 0.0
  distRewardScale: -10.0
  rotRewardScale: 1.0
  rotEps: 0.1
  reachGoalBonus: 250
  fallDistance: 0.24
  objectType: "block"
  observationType: "full_state"
  asymmetric_observations: False
  successTolerance: 0.1
sim:
  dt: 0.01667
  substeps: 2
task:
  randomize: False
"""
# IsaacGymEnvs' BallBalance.yaml in miniature (it has no critic observations: asymmetric_observations is ours)
FAKE_BALL_BALANCE_TASK = """
name: BallBalance
env:
  numEnvs: ${resolve_default:4096,${...num_envs}}
  envSpacing: 2.0
  maxEpisodeLength: 500
  actionSpeedScale: 20
  clipObservations: 5.0
  clipActions: 1.0
sim:
  dt: 0.01
  substeps: 1
task:
  randomize: False
"""
# IsaacGymEnvs' AnymalTerrain.yaml in miniature: its terrain, control and learn keys as there (not terrain.seed or
# learn.frictionBuckets: ours)
FAKE_ANYMAL_TERRAIN_TASK = """
name: AnymalTerrain
env:
  numEnvs: ${resolve_default:4096,${...num_envs}}
  terrain:
    terrainType: trimesh
    staticFriction: 1.0
    curriculum: true
    maxInitMapLevel: 0
    numLevels: 10
    numTerrains: 20
    terrainProportions: [0.1, 0.1, 0.35, 0.25, 0.2]
  control:
    stiffness: 80.0
    damping: 2.0
    actionScale: 0.5
    decimation: 4
  learn:
    addNoise: true
    frictionRange: [0.5, 1.25]
    pushInterval_s: 15
    episodeLength_s: 20
sim:
  dt: 0.005
  substeps: 1
"""
FAKE_INIT = """
from omegaconf import OmegaConf

for name, fn in (("eq", lambda x, y: x.lower() == y.lower()), ("contains", lambda x, y: x.lower() in y.lower()),
                 ("resolve_default", lambda default, arg: default if arg == "" else arg)):
    if not OmegaConf.has_resolver(name):
        OmegaConf.register_new_resolver(name, fn)
CALLS = []
MAKE_VECTASK = None


def make(**kwargs):
    CALLS.append(kwargs)
    return MAKE_VECTASK(num_envs=kwargs["num_envs"])
"""


def _install_fake_isaacgym(monkeypatch, tmp_path, with_envs=True):
    """Put fake isaacgym (and an isaacgymenvs package on disk, with its cfg/ and a make that records its kwargs)
    into sys.modules."""
    monkeypatch.setitem(sys.modules, "isaacgym", types.ModuleType("isaacgym"))
    if not with_envs:
        monkeypatch.delitem(sys.modules, "isaacgymenvs", raising=False)
        return None
    package = tmp_path / "fake_site" / "isaacgymenvs"
    (package / "cfg" / "task").mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_INIT)
    (package / "cfg" / "config.yaml").write_text(FAKE_CONFIG)
    for name in ("Ant", "Humanoid"):
        (package / "cfg" / "task" / f"{name}.yaml").write_text(FAKE_TASK.format(name=name))
    (package / "cfg" / "task" / "Anymal.yaml").write_text(FAKE_ANYMAL_TASK)
    (package / "cfg" / "task" / "BallBalance.yaml").write_text(FAKE_BALL_BALANCE_TASK)
    (package / "cfg" / "task" / "AnymalTerrain.yaml").write_text(FAKE_ANYMAL_TERRAIN_TASK)
    (package / "cfg" / "task" / "FrankaCabinet.yaml").write_text(FAKE_FRANKA_CABINET_TASK)
    (package / "cfg" / "task" / "ShadowHand.yaml").write_text(FAKE_SHADOW_HAND_TASK)
    spec = importlib.util.spec_from_file_location("isaacgymenvs", str(package / "__init__.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.MAKE_VECTASK = FakeVecTask
    monkeypatch.setitem(sys.modules, "isaacgymenvs", mod)
    return mod.CALLS


def _task(calls):
    """The task config the last isaacgymenvs.make call was given, resolved."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(calls[-1]["cfg"].task, resolve=True)


@pytest.fixture
def no_isaacgym(monkeypatch):
    monkeypatch.delitem(sys.modules, "isaacgym", raising=False)
    monkeypatch.delitem(sys.modules, "isaacgymenvs", raising=False)
    assert importlib.util.find_spec("isaacgym") is None, "these tests assume Isaac Gym is not installed"


def test_make_isaacgym_not_installed(no_isaacgym):
    with pytest.raises(UserError) as info:
        make("Ant", 8, sim="isaacgym")
    message = str(info.value)
    assert "Isaac Gym" in message
    assert "docker" in message


def test_make_env_isaacgym_installed_but_imported_after_torch(no_isaacgym, monkeypatch):
    """find_spec finds isaacgym but it is not loaded: the error says to import it before torch."""
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name == "isaacgym":
            return importlib.machinery.ModuleSpec("isaacgym", None)
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(UserError) as info:
        isaacgym_backend.make_env("Ant", 8, 0, "cpu")
    assert "import isaacgym" in str(info.value)
    assert "before `import torch`" in str(info.value)


def test_make_isaacgym_without_isaacgymenvs(monkeypatch, tmp_path):
    _install_fake_isaacgym(monkeypatch, tmp_path, with_envs=False)
    assert importlib.util.find_spec("isaacgymenvs") is None
    with pytest.raises(UserError) as info:
        make("Ant", 8, sim="isaacgym")
    assert "IsaacGymEnvs" in str(info.value)


def test_make_isaacgym_with_fake_modules(monkeypatch, tmp_path):
    calls = _install_fake_isaacgym(monkeypatch, tmp_path)
    env = make("Ant", 8, sim="isaacgym", seed=3, device="cpu")
    assert isinstance(env, IsaacGymVecEnv)
    assert len(calls) == 1
    kwargs = calls[0]
    assert kwargs["task"] == "Ant"
    assert kwargs["num_envs"] == 8
    assert kwargs["seed"] == 3
    assert kwargs["headless"] is True and kwargs["force_render"] is False
    assert kwargs["graphics_device_id"] == -1
    assert kwargs["sim_device"] == "cpu"
    assert kwargs["rl_device"] == "cpu"
    task = _task(calls)
    assert task["env"]["numEnvs"] == 8 and task["env"]["episodeLength"] == 1000  # IsaacGymEnvs' own values
    assert task["sim"]["use_gpu_pipeline"] is True and task["sim"]["physx"]["use_gpu"] is False
    assert env.num_envs == 8
    assert env.reset()["obs"].shape == (8, 2)


def test_every_changed_task_value_and_device_key_reaches_isaacgymenvs(monkeypatch, tmp_path):
    """What a user types on our command line (task.env.*, task.sim.*, sim_device, pipeline, ...) is what
    IsaacGymEnvs builds its task from; the MuJoCo port's own keys stay here."""
    from isaac_ppo.envs.make import load_task_config

    calls = _install_fake_isaacgym(monkeypatch, tmp_path)
    ours = load_task_config("Ant")
    ours.env.episodeLength = 200
    ours.env.powerScale = 0.5
    ours.sim.substeps = 4
    ours.mujoco.timestep = 0.001  # the port's own: not IsaacGymEnvs'
    options = {"sim_device": "cuda:1", "pipeline": "cpu", "graphics_device_id": 2, "headless": False,
               "force_render": True}
    make("Ant", 16, sim="isaacgym", seed=1, device="cuda:0", task_cfg=ours, isaacgym_options=options)
    kwargs, task = calls[-1], _task(calls)
    assert (kwargs["sim_device"], kwargs["rl_device"], kwargs["graphics_device_id"]) == ("cuda:1", "cuda:0", 2)
    assert kwargs["headless"] is False and kwargs["force_render"] is True
    assert task["env"] == {"numEnvs": 16, "episodeLength": 200, "powerScale": 0.5, "headingWeight": 0.5}
    assert task["sim"]["substeps"] == 4 and task["sim"]["dt"] == 0.0166
    assert task["sim"]["use_gpu_pipeline"] is False and task["sim"]["physx"]["use_gpu"] is True
    assert "mujoco" not in task
    # a key IsaacGymEnvs' task does not have: one line naming it
    ours.env.madeUp = 1
    with pytest.raises(UserError, match=r"IsaacGymEnvs' config for Ant refused .*task.env.madeUp=1"):
        make("Ant", 16, sim="isaacgym", task_cfg=ours)


def test_sim_isaacgym_task_anymal_is_isaacgymenvs_anymal_with_the_same_overrides(monkeypatch, tmp_path):
    """task=Anymal on sim=isaacgym: IsaacGymEnvs' own Anymal, built from its own Anymal.yaml, with every value the
    user changed in our task config (IsaacGymEnvs' nested key names: env.control.*, env.learn.*, command ranges)
    forwarded onto it; the MuJoCo port's own keys (mujoco.*) stay here."""
    from isaac_ppo.envs.make import load_task_config

    calls = _install_fake_isaacgym(monkeypatch, tmp_path)
    ours = load_task_config("Anymal")
    ours.env.control.stiffness = 60.0
    ours.env.learn.episodeLength_s = 20
    ours.env.randomCommandVelocityRanges.linear_x = [0.0, 1.5]
    ours.mujoco.timestep = 0.0025  # the port's own: not IsaacGymEnvs'
    make("Anymal", 32, sim="isaacgym", seed=2, device="cuda:0", task_cfg=ours)
    kwargs, task = calls[-1], _task(calls)
    assert kwargs["task"] == "Anymal" and kwargs["num_envs"] == 32 and kwargs["seed"] == 2
    assert task["env"]["numEnvs"] == 32
    assert task["env"]["control"] == {"stiffness": 60.0, "damping": 2.0, "actionScale": 0.5, "controlFrequencyInv": 1}
    assert task["env"]["learn"] == {"torqueRewardScale": -0.000025, "episodeLength_s": 20}
    assert task["env"]["randomCommandVelocityRanges"]["linear_x"] == [0.0, 1.5]
    assert task["env"]["randomCommandVelocityRanges"]["yaw"] == [-1.0, 1.0]  # (unchanged: IsaacGymEnvs' own)
    assert task["sim"] == {"dt": 0.02, "substeps": 2} and "mujoco" not in task


def test_sim_isaacgym_task_anymalterrain_is_isaacgymenvs_anymalterrain_with_the_same_overrides(monkeypatch, tmp_path):
    """task=AnymalTerrain on sim=isaacgym: IsaacGymEnvs' own AnymalTerrain (its trimesh terrain, curriculum and
    randomisation) from its own AnymalTerrain.yaml, the user's terrain, noise and friction changes forwarded; the
    port's own keys stay here: mujoco.*, the evaluation envs' eval_env, and the map seed, which IsaacGymEnvs has no
    key for (asked for there: refused in one line)."""
    from isaac_ppo.envs.make import load_task_config

    calls = _install_fake_isaacgym(monkeypatch, tmp_path)
    ours = load_task_config("AnymalTerrain")
    ours.env.terrain.numLevels = 5
    ours.env.terrain.terrainProportions = [0.2, 0.2, 0.2, 0.2, 0.2]
    ours.env.learn.addNoise = False
    ours.env.learn.frictionRange = [0.8, 1.0]
    ours.mujoco.substeps = 4
    make("AnymalTerrain", 64, sim="isaacgym", seed=3, device="cuda:0", task_cfg=ours)
    task = _task(calls)
    assert task["env"]["terrain"]["numLevels"] == 5 and task["env"]["terrain"]["numTerrains"] == 20
    assert task["env"]["terrain"]["terrainProportions"] == [0.2] * 5
    assert task["env"]["learn"]["addNoise"] is False and task["env"]["learn"]["frictionRange"] == [0.8, 1.0]
    assert task["env"]["control"]["decimation"] == 4 and task["sim"] == {"dt": 0.005, "substeps": 1}
    assert "mujoco" not in task and "eval_env" not in task and "seed" not in task["env"]["terrain"]
    ours.env.terrain.seed = 7
    with pytest.raises(UserError, match=r"IsaacGymEnvs' config for AnymalTerrain refused .*task.env.terrain.seed=7"):
        make("AnymalTerrain", 64, sim="isaacgym", task_cfg=ours)


def test_sim_isaacgym_task_ballbalance_is_isaacgymenvs_ballbalance_with_the_same_overrides(monkeypatch, tmp_path):
    """task=BallBalance on sim=isaacgym: IsaacGymEnvs' own BallBalance from its own BallBalance.yaml, the user's
    changes forwarded; its critic observations are the port's own (IsaacGymEnvs' BallBalance has none), so asking
    for them there is refused in one line, before IsaacGymEnvs builds anything."""
    from isaac_ppo.envs.make import load_task_config

    calls = _install_fake_isaacgym(monkeypatch, tmp_path)
    ours = load_task_config("BallBalance")
    ours.env.maxEpisodeLength = 300
    ours.env.actionSpeedScale = 10
    make("BallBalance", 16, sim="isaacgym", seed=1, device="cuda:0", task_cfg=ours)
    task = _task(calls)
    assert calls[-1]["task"] == "BallBalance" and task["env"]["numEnvs"] == 16
    assert task["env"]["maxEpisodeLength"] == 300 and task["env"]["actionSpeedScale"] == 10
    assert task["sim"] == {"dt": 0.01, "substeps": 1} and "mujoco" not in task
    assert "asymmetric_observations" not in task["env"]
    ours.env.asymmetric_observations = True
    before = len(calls)
    with pytest.raises(UserError, match="asymmetric_observations"):
        make("BallBalance", 16, sim="isaacgym", seed=1, device="cuda:0", task_cfg=ours)
    assert len(calls) == before


def test_sim_isaacgym_task_frankacabinet_is_isaacgymenvs_own_with_the_same_overrides(monkeypatch, tmp_path):
    """task=FrankaCabinet on sim=isaacgym: IsaacGymEnvs' own FrankaCabinet from its own FrankaCabinet.yaml (its
    asset, aggregate and noise keys its own), the user's prop count and reward scales forwarded, the port's mujoco.*
    kept here."""
    from isaac_ppo.envs.make import load_task_config

    calls = _install_fake_isaacgym(monkeypatch, tmp_path)
    ours = load_task_config("FrankaCabinet")
    ours.env.numProps = 0
    ours.env.openRewardScale = 10.0
    ours.mujoco.substeps = 4
    make("FrankaCabinet", 32, sim="isaacgym", seed=2, device="cuda:0", task_cfg=ours)
    task = _task(calls)
    assert calls[-1]["task"] == "FrankaCabinet" and task["env"]["numEnvs"] == 32
    assert task["env"]["numProps"] == 0 and task["env"]["openRewardScale"] == 10.0
    assert task["env"]["aggregateMode"] == 3 and task["env"]["startPositionNoise"] == 0.0  # (IsaacGymEnvs' own)
    assert task["sim"] == {"dt": 0.0166, "substeps": 1} and "mujoco" not in task


def test_sim_isaacgym_task_shadowhand_is_isaacgymenvs_own_with_its_asymmetric_critic(monkeypatch, tmp_path):
    """task=ShadowHand on sim=isaacgym: IsaacGymEnvs' own ShadowHand from its own ShadowHand.yaml (its random forces
    its own), the user's observation type and reward scales forwarded, asymmetric=true handed to
    it as its env.asymmetric_observations (its states then reach the critic through the adapter), mujoco.* kept."""
    from isaac_ppo.envs.make import load_task_config

    calls = _install_fake_isaacgym(monkeypatch, tmp_path)
    ours = load_task_config("ShadowHand")
    ours.env.observationType = "openai"
    ours.env.reachGoalBonus = 100.0
    ours.env.asymmetric_observations = True
    ours.mujoco.substeps = 4
    make("ShadowHand", 32, sim="isaacgym", seed=2, device="cuda:0", task_cfg=ours)
    task = _task(calls)
    assert calls[-1]["task"] == "ShadowHand" and task["env"]["numEnvs"] == 32
    assert task["env"]["observationType"] == "openai" and task["env"]["reachGoalBonus"] == 100.0
    assert task["env"]["asymmetric_observations"] is True
    assert task["env"]["objectType"] == "block" and task["env"]["forceScale"] == 0.0  # (ours, IsaacGymEnvs' own)
    assert task["sim"] == {"dt": 0.01667, "substeps": 2} and "mujoco" not in task


def test_make_env_with_fake_modules(monkeypatch, tmp_path):
    calls = _install_fake_isaacgym(monkeypatch, tmp_path)
    env = isaacgym_backend.make_env("Humanoid", 16, 7, "cpu")
    assert isinstance(env, IsaacGymVecEnv)
    kwargs = {k: v for k, v in calls[0].items() if k != "cfg"}
    assert kwargs == dict(seed=7, task="Humanoid", num_envs=16, sim_device="cpu", rl_device="cpu",
                          graphics_device_id=-1, headless=True, force_render=False)
    assert _task(calls)["name"] == "Humanoid" and _task(calls)["env"]["numEnvs"] == 16


def test_make_isaacgym_bad_num_envs(monkeypatch, tmp_path):
    calls = _install_fake_isaacgym(monkeypatch, tmp_path)
    with pytest.raises(InputError):
        make("Ant", 0, sim="isaacgym")
    assert calls == []


def test_resolve_sim_auto_is_mujoco_here(no_isaacgym, monkeypatch):
    assert make_module.resolve_sim("auto") == "mujoco"
    # CUDA alone is not enough: Isaac Gym must be loaded
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert make_module.resolve_sim("auto") == "mujoco"


def test_resolve_sim_auto_needs_cuda_as_well(monkeypatch, tmp_path):
    _install_fake_isaacgym(monkeypatch, tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert make_module.resolve_sim("auto") == "mujoco"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert make_module.resolve_sim("auto") == "isaacgym"


@pytest.mark.parametrize("sim", ["mujoco", "isaacgym"])
def test_resolve_sim_explicit(sim):
    assert make_module.resolve_sim(sim) == sim


def test_resolve_sim_unknown_lists_choices():
    with pytest.raises(UserError) as info:
        make_module.resolve_sim("bullet")
    message = str(info.value)
    assert "'bullet'" in message
    for choice in ("auto", "mujoco", "isaacgym"):
        assert choice in message


def test_actions_reach_vectask_as_float32(env, fake):
    env.reset()
    env.step(torch.zeros(4, 2, dtype=torch.float64))
    assert fake.received[-1].dtype == torch.float32


def test_per_env_extras_are_cut_to_the_active_envs(env, fake):
    original_step = fake.step

    def step_with_log(actions):
        obs, rew, resets, extras = original_step(actions)
        extras["episode_progress"] = fake.progress_buf.clone()  # a per-env extra, as tasks add them
        extras["scalar_log"] = torch.tensor(1.5)
        return obs, rew, resets, extras

    fake.step = step_with_log
    env.reset()
    env.set_active(3)
    _, _, _, extras = env.step(torch.zeros(3, 2))
    assert extras["episode_progress"].shape == (3,)
    assert extras["scalar_log"].item() == 1.5


def test_sim_isaacgym_refuses_frankacabinets_open_ends_episode_off(monkeypatch, tmp_path):
    """env.openEndsEpisode is the port's key: IsaacGymEnvs' FrankaCabinet always ends the episode past 0.39 m, so
    false on sim=isaacgym is refused in one line naming it (IsaacGymEnvs' own config has no such key), not ignored;
    its default, true, is IsaacGymEnvs' behaviour and is not forwarded."""
    from isaac_ppo.envs.make import load_task_config

    calls = _install_fake_isaacgym(monkeypatch, tmp_path)
    ours = load_task_config("FrankaCabinet")
    make("FrankaCabinet", 32, sim="isaacgym", seed=2, device="cuda:0", task_cfg=ours)
    assert "openEndsEpisode" not in _task(calls)["env"]
    ours.env.openEndsEpisode = False
    with pytest.raises(UserError, match="openEndsEpisode"):
        make("FrankaCabinet", 32, sim="isaacgym", seed=2, device="cuda:0", task_cfg=ours)
