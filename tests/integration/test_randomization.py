"""IsaacGymEnvs' domain randomisation on the MuJoCo ports (tasks/randomization.py, tasks/randomizer.py): the draws'
distributions and schedules, the schema's refusals, the model fields each env gets on both backends, re-draws at
the stated frequency, noise, gravity, determinism and resume, and randomize=false untouched."""
from __future__ import annotations

import copy
import importlib.util
import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from helpers import MJWARP_WORKER, require_system
from isaac_ppo.envs import make
from isaac_ppo.envs.make import load_task_config
from isaac_ppo.errors import UserError
from isaac_ppo.tasks.randomization import Draw, buckets_of, read_plan
from isaac_ppo.tasks.randomizer import DERIVED

BOTH = ["mujoco", pytest.param("mjwarp", marks=[MJWARP_WORKER, pytest.mark.slow])]


def _config(task, **params):
    """The task's shipped config with randomisation on, its randomization_params updated by params (dotted keys)."""
    cfg = OmegaConf.to_container(load_task_config(task), resolve=True)
    cfg["task"]["randomize"] = True
    for key, value in params.items():
        node = cfg["task"]["randomization_params"]
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return cfg


def _env(task, num_envs=8, sim="mujoco", seed=0, **params):
    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    return make(task, num_envs, sim=sim, seed=seed, task_cfg=_config(task, **params))


def _draw(distribution, low, high, operation="scaling", **extra):
    return Draw("k", low, high, operation, distribution, **extra)


def test_the_draws_follow_their_distributions():
    g = torch.Generator().manual_seed(0)
    uniform = _draw("uniform", 0.5, 1.5).sample((100_000,), 0, g, "cpu")
    assert 0.5 <= float(uniform.min()) and float(uniform.max()) <= 1.5 and abs(float(uniform.mean()) - 1.0) < 0.005
    log = _draw("loguniform", 0.3, 3.0).sample((100_000,), 0, g, "cpu")
    assert 0.3 <= float(log.min()) and float(log.max()) <= 3.0
    # log-uniform: log x uniform on [log 0.3, log 3]: its mean (log 0.3 + log 3) / 2 = log 0.949, and P(x < 1) =
    # log(1 / 0.3) / log(10) = 0.523
    assert abs(float(log.log().mean()) - math.log(0.9) / 2) < 0.01
    assert abs(float((log < 1.0).float().mean()) - math.log(1 / 0.3) / math.log(10)) < 0.01
    gauss = _draw("gaussian", 0.0, 0.4, "additive").sample((100_000,), 0, g, "cpu")
    assert abs(float(gauss.mean())) < 0.005 and abs(float(gauss.std()) - 0.4) < 0.005  # (its "variance" is a deviation)


def test_schedules_scale_ranges_toward_none():
    """linear: a fraction min(frames, steps)/steps of the range; constant: none before schedule_steps; an additive
    range shrinks toward 0, a scaling one toward 1."""
    linear = _draw("uniform", 0.5, 1.5, schedule="linear", schedule_steps=100)
    assert linear.bounds(0) == (1.0, 1.0) and linear.bounds(50) == (0.75, 1.25) and linear.bounds(500) == (0.5, 1.5)
    added = _draw("uniform", -0.2, 0.4, "additive", schedule="constant", schedule_steps=10)
    assert added.bounds(9) == (0.0, 0.0) and added.bounds(10) == (-0.2, 0.4)
    gauss = _draw("gaussian", 0.0, 0.4, "scaling", schedule="linear", schedule_steps=4)
    assert gauss.bounds(2) == (0.5, 0.2)


def test_buckets_are_isaacgymenvs_including_its_wrap_below_the_lowest():
    draw = _draw("uniform", 0.7, 1.3, num_buckets=3)  # buckets 0.7, 0.9, 1.1
    values = torch.tensor([0.7, 0.95, 1.29, 1.5, 0.69], dtype=torch.float64)
    torch.testing.assert_close(buckets_of(values, draw), torch.tensor([0.7, 0.9, 1.1, 1.1, 1.1], dtype=torch.float64))


@pytest.mark.parametrize("key,value,fragment", [
    ("actions.distribution", "beta", "actions.distribution='beta' is outside its domain: one of gaussian, uniform"),
    ("actions.operation", "multiply", "actions.operation='multiply' is outside its domain: one of additive, scaling"),
    ("actor_params.ant.dof_properties.damping.range", [1.5, 0.5], "damping.range=[1.5, 0.5]: min > max"),
    ("frequency", -1, "frequency=-1 is outside its domain: an integer in [0, inf)"),
    ("actor_params.ant.rigid_body_properties.mass.range", [0.0, 1.5], "a scaling that can reach 0 or below"),
    ("actor_params.ant.rigid_shape_properties", {"friction": {"range": [1.0, 0.5], "operation": "scaling",
                                                               "distribution": "gaussian"}},
     "a scaling that can reach 0 or below (gaussian"),
    ("actor_params.ant.dof_properties.damping.distribution", "loguniform", None),  # (valid: [0.5, 1.5] above 0)
    ("actor_params.ant.dof_properties.stiffnes", {"range": [1, 2], "operation": "scaling", "distribution": "uniform"},
     "IsaacGymEnvs' dof_properties has no attribute 'stiffnes'"),
    ("actor_params.robot", {}, "this task has no actor 'robot' (its actors: ant)"),
    ("actions.schedule", "cosine", "actions.schedule='cosine' is outside its domain: one of linear, constant"),
    ("actor_params.ant.scale", {"range": [-1.0, 0.5], "operation": "additive", "distribution": "uniform"},
     "scale: an additive uniform [-1.0, 0.5] can take 1 to 0 or below"),
    ("actor_params.ant.scale", {"range": [0.0, 1.1], "operation": "scaling", "distribution": "uniform"},
     "a scaling that can reach 0 or below"),
])
def test_the_schema_refuses_in_one_line_naming_the_key(key, value, fragment):
    params = _config("Ant", **{key: value})["task"]["randomization_params"]
    if fragment is None:
        read_plan(params, ("ant",))
        return
    with pytest.raises(UserError) as error:
        read_plan(params, ("ant",))
    message = str(error.value)
    assert fragment in message and "\n" not in message and message.startswith("task.task.randomization_params"), message


def test_an_additive_draw_that_takes_a_mass_to_zero_is_refused_when_the_env_is_built():
    with pytest.raises(UserError, match="can take a value of this model .* to 0 or below"):
        _env("Ant", 2, **{"actor_params.ant.rigid_body_properties.mass": {
            "range": [-5.0, 0.0], "operation": "additive", "distribution": "uniform"}})


@pytest.mark.parametrize("sim", BOTH)
def test_each_env_gets_its_own_draws_in_the_model_fields(sim):
    """Ant's block: masses x U(0.5, 1.5) with the inertia scaled alike, DOF damping x U(0.5, 1.5), the ranges
    moved by N(0, 0.01); each env and each element its own draw; MuJoCo's derived masses follow (set_const)."""
    env = _env("Ant", 8, sim=sim)
    env.reset()
    model, fields = env.model, env.sim.model_fields
    mass = fields["body_mass"].double().cpu()
    ratio = mass[:, 1:] / torch.as_tensor(model.body_mass[1:])
    assert float(ratio.min()) >= 0.5 - 1e-6 and float(ratio.max()) <= 1.5 + 1e-6
    assert len({round(float(r), 6) for r in ratio.flatten()}) == ratio.numel()  # (all different)
    inertia = fields["body_inertia"].double().cpu()[:, 1:] / torch.as_tensor(model.body_inertia[1:])
    torch.testing.assert_close(inertia, ratio.unsqueeze(-1).expand_as(inertia), rtol=1e-5, atol=0)
    subtree = fields["body_subtreemass"].double().cpu()[:, 1]
    torch.testing.assert_close(subtree, mass[:, 1:].sum(dim=1), rtol=1e-5, atol=0)
    damping = fields["dof_damping"].double().cpu()[:, 6:] / torch.as_tensor(model.dof_damping[6:])
    assert float(damping.min()) >= 0.5 - 1e-6 and float(damping.max()) <= 1.5 + 1e-6 and float(damping.std()) > 0.1
    moved = fields["jnt_range"].double().cpu()[:, 1:] - torch.as_tensor(model.jnt_range[1:])
    assert 0.003 < float(moved.std()) < 0.02 and float(moved.abs().max()) < 0.06


def test_actor_parameters_are_redrawn_at_a_reset_after_frequency_steps_and_setup_only_never():
    env = _env("Ant", 4, frequency=3)
    env.reset()
    fields = env.sim.model_fields
    mass, damping = fields["body_mass"].clone(), fields["dof_damping"].clone()
    actions = torch.zeros(4, 8)
    env.step(actions)
    env.step(actions)
    env.reset_idx(torch.tensor([0]))  # 2 steps since its draw: kept
    assert torch.equal(fields["dof_damping"], damping)
    env.step(actions)
    env.reset_idx(torch.tensor([1, 2]))  # 3 steps: re-drawn, masses (setup_only) kept; env 0 and 3 (no reset) kept
    changed = (fields["dof_damping"] != damping).any(dim=1)
    assert changed.tolist() == [False, True, True, False]
    assert torch.equal(fields["body_mass"], mass)


def _recording_set_const(env, monkeypatch):
    """The envs each set_const call of env's simulator is asked for (None: all), the call itself kept."""
    calls, set_const = [], env.sim.set_const

    def recorded(ids=None):
        calls.append(None if ids is None else ids.tolist())
        set_const(ids)

    monkeypatch.setattr(env.sim, "set_const", recorded)
    return calls


def test_a_redraw_renews_the_derived_masses_in_the_envs_drawn_and_only_when_a_mass_moved(monkeypatch):
    """A mass re-drawn (setup_only false) renews MuJoCo's derived fields in the envs drawn, and they are what a
    set_const over the whole pool gives; a re-draw of damping and ranges alone (the shipped block: masses
    setup_only) calls no set_const."""
    actions = torch.zeros(4, 8)
    env = _env("Ant", 4, frequency=3, **{"actor_params.ant.rigid_body_properties.mass.setup_only": False})
    env.reset()
    calls = _recording_set_const(env, monkeypatch)
    fields = env.sim.model_fields
    mass = fields["body_mass"].clone()
    for _ in range(3):
        env.step(actions)
    env.reset_idx(torch.tensor([1, 2]))
    assert calls == [[1, 2]]
    assert (fields["body_mass"] != mass).any(dim=1).tolist() == [False, True, True, False]
    torch.testing.assert_close(fields["body_subtreemass"][:, 1].double(), fields["body_mass"][:, 1:].double().sum(1))
    derived = [f for f in DERIVED if f in fields]
    assert "body_invweight0" in derived
    renewed = {f: fields[f].clone() for f in derived}
    env.sim.set_const(None)  # (the whole pool, from its fields as they are: the same values)
    for f in derived:
        assert torch.equal(fields[f], renewed[f]), f

    shipped = _env("Ant", 4, frequency=3)
    shipped.reset()
    calls = _recording_set_const(shipped, monkeypatch)
    damping = shipped.sim.model_fields["dof_damping"].clone()
    for _ in range(3):
        shipped.step(actions)
    shipped.reset_idx(torch.tensor([1, 2]))
    assert (shipped.sim.model_fields["dof_damping"] != damping).any(dim=1).tolist() == [False, True, True, False]
    assert calls == []


def test_observation_and_action_noise_are_isaacgymenvs_white_and_correlated():
    """Gaussian additive noise of deviation 0.5 on the observations, a correlated part of deviation 0.3 that holds
    between re-draws: the observed minus the true observation has deviation sqrt(0.5^2 + 0.3^2)."""
    env = _env("Ant", 256, **{"observations.range": [0.0, 0.5], "observations.range_correlated": [0.0, 0.3],
                              "actor_params": None, "frequency": 1000})
    env.reset()
    seen = [env.step(torch.zeros(256, 8))[0]["obs"] for _ in range(3)]
    true = env.compute_observations(slice(0, 256))
    noise = seen[-1] - true.clamp(-5, 5)
    inside = true.abs() < 4.0  # (away from the clip)
    assert abs(float(noise[inside].std()) - math.hypot(0.5, 0.3)) < 0.02
    corr = env.randomizer.correlated["observations"]
    assert corr is not None and torch.equal(corr, env.randomizer.correlated["observations"])
    white = env.randomizer.noisy("observations", torch.zeros(256, 60), slice(0, 256)) - 0.3 * corr
    assert abs(float(white.std()) - 0.5) < 0.01


@pytest.mark.parametrize("sim", BOTH)
def test_gravity_is_one_draw_for_the_whole_pool_and_acts(sim):
    """sim_params.gravity additive N(0, 0.4) per axis (IsaacGymEnvs' usual line) on Ingenuity, one free body: with
    no thrust every env falls at the drawn gravity, re-drawn once `frequency` frames have passed, at a reset."""
    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    cfg = OmegaConf.to_container(load_task_config("Ingenuity"), resolve=True)
    cfg["task"] = {"randomize": True, "randomization_params": {"frequency": 2, "sim_params": {"gravity": {
        "range": [0.0, 0.4], "operation": "additive", "distribution": "gaussian"}}}}
    env = make("Ingenuity", 2, sim=sim, seed=0, task_cfg=cfg)
    env.reset()
    gravity = env.randomizer.gravity.clone()
    assert float((gravity - torch.tensor([0.0, 0.0, -3.721], dtype=torch.float64)).abs().max()) > 1e-3
    env.qpos[:, 2] = 5.0
    env.qvel[:] = 0.0
    env.step(torch.zeros(2, 6))
    fall = env.qvel[:, 0:3].double().cpu() / env.dt
    torch.testing.assert_close(fall, gravity.expand(2, 3), rtol=1e-4, atol=1e-4)
    env.reset_idx(torch.tensor([0]))  # 1 frame since the draw: kept
    assert torch.equal(env.randomizer.gravity, gravity)
    env.step(torch.zeros(2, 6))
    env.reset_idx(torch.tensor([1]))  # 2 frames: a new one, for both envs
    assert not torch.equal(env.randomizer.gravity, gravity)


def test_anymal_servos_gains_are_its_dof_stiffness_and_damping():
    """A position actuator's kp and kv are PhysX's drive stiffness and damping: gainprm[0] = -biasprm[1] = kp'."""
    env = _env("Anymal", 4, **{"sim_params.gravity.schedule": None, "actor_params.anymal.dof_properties.stiffness":
                               {"range": [0.5, 1.5], "operation": "scaling", "distribution": "uniform"}})
    env.reset()
    gain, bias = env.sim.model_fields["actuator_gainprm"], env.sim.model_fields["actuator_biasprm"]
    torch.testing.assert_close(gain[:, :, 0], -bias[:, :, 1])
    kp = gain[:, :, 0] / float(env.model.actuator_gainprm[0, 0])
    assert float(kp.min()) >= 0.5 - 1e-6 and float(kp.max()) <= 1.5 + 1e-6 and float(kp.std()) > 0.1


def test_the_same_seed_draws_the_same_and_a_resume_continues_exactly():
    first, second = _env("Ant", 4, seed=3), _env("Ant", 4, seed=3)
    first.reset(), second.reset()
    assert torch.equal(first.sim.model_fields["body_mass"], second.sim.model_fields["body_mass"])
    g = torch.Generator().manual_seed(1)
    actions = [torch.rand(4, 8, generator=g) * 2 - 1 for _ in range(12)]
    for a in actions[:5]:
        first.step(a)
    saved = copy.deepcopy(first.state_dict())
    resumed = _env("Ant", 4, seed=99)  # (another seed: everything must come from the state)
    resumed.load_state_dict(saved)
    for a in actions[5:]:
        out_a, out_b = first.step(a), resumed.step(a)
        assert torch.equal(out_a[0]["obs"], out_b[0]["obs"]) and torch.equal(out_a[1], out_b[1])
    for name in first.randomizer.fields:
        assert torch.equal(first.sim.model_fields[name], resumed.sim.model_fields[name]), name


def test_randomize_false_is_the_port_as_before():
    """Off (the shipped default): no randomiser, no per-env fields but the task's own, and the same steps as a
    config without IsaacGymEnvs' task node at all."""
    cfg = OmegaConf.to_container(load_task_config("Ant"), resolve=True)
    assert cfg["task"]["randomize"] is False
    bare = {k: v for k, v in cfg.items() if k != "task"}
    shipped, without = make("Ant", 4, sim="mujoco", task_cfg=cfg), make("Ant", 4, sim="mujoco", task_cfg=bare)
    assert shipped.randomizer is None and shipped.sim.model_fields == {}
    shipped.reset(), without.reset()
    for _ in range(5):
        a, b = shipped.step(torch.ones(4, 8)), without.step(torch.ones(4, 8))
        assert torch.equal(a[0]["obs"], b[0]["obs"]) and torch.equal(a[1], b[1])


def test_randomize_true_without_a_block_is_one_line():
    cfg = OmegaConf.to_container(load_task_config("Cartpole"), resolve=True)
    cfg["task"]["randomize"] = True
    with pytest.raises(UserError, match="task Cartpole has no task.task.randomization_params block"):
        make("Cartpole", 2, sim="mujoco", task_cfg=cfg)


def test_shadow_hands_block_reaches_its_tendons_and_both_actors():
    env = _env("ShadowHand", 2)
    kinds = {(t.draw.key.rsplit(".", 2)[-2], t.writes[0][0]) for t in env.randomizer.targets if t.writes}
    assert ("tendon_properties", "tendon_damping") in kinds and ("rigid_shape_properties", "geom_friction") in kinds
    env.reset()
    tendon = env.sim.model_fields["tendon_damping"].double()
    ratio = tendon[:, :4] / torch.as_tensor(np.asarray(env.model.tendon_damping[:4]))
    assert float(ratio.min()) >= 0.3 - 1e-6 and float(ratio.max()) <= 3.0 + 1e-6
    object_body = env.model.body("object").id
    assert float(env.sim.model_fields["body_mass"][:, object_body].std()) > 0


@pytest.mark.parametrize("sim", BOTH)
def test_ant_trains_with_its_randomisation_on_through_the_cli(tmp_path, sim):
    """`isaac-ppo-train task=Ant task.task.randomize=true`, one small iteration; the checkpoint carries the draws."""
    from helpers import train_in_process
    from isaac_ppo.io.checkpoint import load

    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    result = train_in_process(str(tmp_path), "task=Ant", "task.task.randomize=true", f"sim={sim}", "num_envs=16",
                              "agent.horizon=8", "agent.num_mini_batches=2", "max_iterations=1", "eval.final=false",
                              "diagnostics=off")
    assert result.summary["iterations"] == 1
    state = load(f"{result.run_dir}/checkpoints/last.pt")
    env_state = state["env"]
    masses = env_state["randomizer"]["fields"]["body_mass"]
    assert masses.shape[0] == 16 and float(masses[:, 1].std()) > 0


def test_what_has_no_mujoco_counterpart_is_said_once_a_process(monkeypatch, capsys):
    """A run builds a training and an evaluation env, each with a Randomizer: the line naming what is not applied
    comes once (it came twice before)."""
    from isaac_ppo.tasks import randomizer

    monkeypatch.setattr(randomizer, "_SAID", set())
    _env("AllegroHand", 2), _env("AllegroHand", 2)
    lines = [line for line in capsys.readouterr().err.splitlines() if "no MuJoCo counterpart" in line]
    assert lines == ["[AllegroHand] randomisation: no MuJoCo counterpart, not applied: actor_params.hand.color"]


def test_allegro_hands_block_reaches_its_servos_and_both_actors():
    """AllegroHand's IsaacGymEnvs block: the hand's position servos' kp and kv x loguniform, the block's scale, mass
    and friction."""
    env = _env("AllegroHand", 2)
    assert env.randomizer.plan.unsupported == ["actor_params.hand.color"] and env.randomizer.scaled_actors == ["object"]
    env.reset()
    gain = env.sim.model_fields["actuator_gainprm"][:, :, 0].double()
    ratio = gain / torch.as_tensor(np.asarray(env.model.actuator_gainprm[:, 0]))
    assert float(ratio.min()) >= 0.75 - 1e-6 and float(ratio.max()) <= 1.5 + 1e-6 and float(ratio.std()) > 0.05
    object_body = env.model.body("object").id
    masses = env.sim.model_fields["body_mass"][:, object_body]
    assert float(masses[0]) != float(masses[1])


def _scaled_allegro(sim="mujoco", num_envs=2, seed=0, scale=(1.2, 1.2), **params):
    """AllegroHand with its block scaled by a draw from scale (a fixed 1.2 by default) and no mass draw on it."""
    return _env("AllegroHand", num_envs, sim=sim, seed=seed, **{
        "actor_params.object.scale.range": list(scale), "actor_params.object.rigid_body_properties": None, **params})


@pytest.mark.parametrize("sim", BOTH)
def test_an_actors_scale_multiplies_its_geometry_and_its_mass_at_constant_density(sim):
    """IsaacGymEnvs' set_actor_scale on AllegroHand's block (its setup_only U(0.95, 1.05); here a fixed 1.2 and no
    mass draw): its box's size, bounds and position x 1.2, its mass x 1.2^3 and inertia x 1.2^5 in every env, and
    MuJoCo's derived masses follow; the hand is untouched."""
    env = _scaled_allegro(sim)
    env.reset()
    model, fields = env.model, env.sim.model_fields
    block = model.body("object").id
    geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == block]
    size = fields["geom_size"].double().cpu()[:, geoms]
    torch.testing.assert_close(size, 1.2 * torch.as_tensor(model.geom_size[geoms]).expand_as(size), rtol=1e-6, atol=0)
    rbound = fields["geom_rbound"].double().cpu()[:, geoms]
    torch.testing.assert_close(rbound, 1.2 * torch.as_tensor(model.geom_rbound[geoms]).expand_as(rbound), rtol=1e-6,
                               atol=0)
    mass = fields["body_mass"].double().cpu()
    torch.testing.assert_close(mass[:, block], torch.full((2,), 1.2 ** 3 * float(model.body_mass[block]),
                                                          dtype=torch.float64), rtol=1e-6, atol=0)
    inertia = fields["body_inertia"].double().cpu()[:, block]
    torch.testing.assert_close(inertia, 1.2 ** 5 * torch.as_tensor(model.body_inertia[block]).expand_as(inertia),
                               rtol=1e-5, atol=0)
    torch.testing.assert_close(fields["body_subtreemass"].double().cpu()[:, block], mass[:, block], rtol=1e-6, atol=0)
    hand_geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] != block and model.geom_bodyid[g] != 0]
    hand = fields["geom_size"].double().cpu()[:, hand_geoms]  # (float32 on MuJoCo Warp)
    torch.testing.assert_close(hand, torch.as_tensor(model.geom_size[hand_geoms]).expand_as(hand), rtol=1e-6, atol=0)
    for _ in range(3):
        obs = env.step(torch.zeros(2, 16))[0]["obs"]
    assert bool(torch.isfinite(obs).all())


def test_a_scaled_block_is_what_the_physics_steps_and_a_mass_draw_stays_in_it():
    """mujoco.batch steps the scaled block as MuJoCo steps a model whose block was built 1.2 times larger (the same
    qpos to 1e-8 after 60 physics steps in contact with the palm; the model as built ends elsewhere); with the mass
    draw on as well, the block's mass is its drawn mass x s^3; resume restores each env's scale."""
    import mujoco

    env = _scaled_allegro()
    env.reset()
    model, sim = env.model, env.sim
    block = model.body("object").id
    reference, plain = copy.deepcopy(model), copy.deepcopy(model)
    for field in env.randomizer.fields:  # (env 0's draws on the hand and gravity's as well: both references have them)
        getattr(reference, field)[:] = sim.model_fields[field][0].numpy()
        getattr(plain, field)[:] = sim.model_fields[field][0].numpy()
    reference.opt.gravity[:] = plain.opt.gravity[:] = env.randomizer.gravity.numpy()
    geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == block]
    for field in ("geom_size", "geom_pos", "geom_rbound", "geom_aabb"):  # (plain: the block as built)
        getattr(plain, field)[geoms] = getattr(model, field)[geoms]
    for field in ("body_ipos", "body_mass", "body_inertia"):
        getattr(plain, field)[block] = getattr(model, field)[block]
    np.testing.assert_allclose(reference.geom_size[geoms], 1.2 * model.geom_size[geoms], rtol=1e-6)  # (float32 draws)
    mujoco.mj_setConst(reference, mujoco.MjData(reference))  # (with a data of its own: it leaves a warm start)
    mujoco.mj_setConst(plain, mujoco.MjData(plain))
    data, plain_data = mujoco.MjData(reference), mujoco.MjData(plain)
    for d in (data, plain_data):
        d.qpos[:], d.qvel[:], d.ctrl[:] = sim.qpos[0].numpy(), sim.qvel[0].numpy(), sim.ctrl[0].numpy()
    sim.step(1, 60)
    for _ in range(60):
        mujoco.mj_step(reference, data)
        mujoco.mj_step(plain, plain_data)
    np.testing.assert_allclose(sim.qpos[0].numpy(), data.qpos, atol=1e-8, rtol=0)
    assert float(np.abs(plain_data.qpos - data.qpos).max()) > 1e-4  # (the block's size is what moved it)

    drawn = _scaled_allegro(num_envs=4, scale=(0.95, 1.05), **{"actor_params.object.rigid_body_properties": {
        "mass": {"range": [0.5, 1.5], "operation": "scaling", "distribution": "uniform", "setup_only": True}}})
    drawn.reset()
    s = drawn.randomizer.scales["object"]
    assert float(s.min()) >= 0.95 and float(s.max()) <= 1.05 and float(s.std()) > 0
    mass = drawn.sim.model_fields["body_mass"][:, block] / float(model.body_mass[block]) / s ** 3
    assert float(mass.min()) >= 0.5 - 1e-9 and float(mass.max()) <= 1.5 + 1e-9 and float(mass.std()) > 0
    resumed = _scaled_allegro(num_envs=4, seed=7, scale=(0.95, 1.05), **{
        "actor_params.object.rigid_body_properties": {"mass": {"range": [0.5, 1.5], "operation": "scaling",
                                                               "distribution": "uniform", "setup_only": True}}})
    resumed.load_state_dict(copy.deepcopy(drawn.state_dict()))
    assert torch.equal(resumed.randomizer.scales["object"], s)
    assert torch.equal(resumed.sim.model_fields["geom_size"], drawn.sim.model_fields["geom_size"])
