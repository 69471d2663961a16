"""The diagnostics probe on shared and separate networks: hooks, what it measures, when, and that it only
reads (no parameter, gradient or training random stream is touched)."""
from __future__ import annotations

import copy
import importlib.util

import pytest
import torch

from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.agent.ppo import PPO
from omegaconf import OmegaConf

from isaac_ppo import domains
from isaac_ppo.config.checks import RUN_DOMAINS, check_diagnostics
from isaac_ppo.diagnostics.probe import Probe, _capture
from isaac_ppo.errors import UserError
from isaac_ppo.scheduler import Plan

from helpers import synthetic_buffer

NUM_OBS, NUM_ACTIONS, T, N = 6, 2, 8, 32
CFG = {"enabled": True, "interval_iterations": 3, "samples": 128, "delta": 0.01, "tau": 0.025, "grid": 10,
       "coverage": True, "coverage_method": "pca", "variants": True, "plot": False}
PPO_CFG = {"learning_rate": 3e-4, "lr_schedule": "constant", "kl_threshold": 0.008, "clip": 0.2,
           "clip_value": True, "critic_coef": 2.0, "entropy_coef": 0.0, "bounds_loss_coef": 0.0001,
           "truncate_grads": True, "grad_norm": 1.0, "normalize_advantage": True, "mixed_precision": False,
           "stale_correction": "none", "stale_update": "current", "stale_clip": "behaviour"}


def _model(separate):
    torch.manual_seed(0)
    return ActorCritic(NUM_OBS, NUM_ACTIONS, [16, 8], separate=separate)


def _buffer(model):
    return synthetic_buffer(model, T, N)


@pytest.mark.parametrize("separate,networks", [(False, ["trunk"]), (True, ["actor", "critic"])])
def test_hooks_capture_every_hidden_layer_and_are_removed(separate, networks):
    model = _model(separate)
    obs = torch.randn(50, NUM_OBS)
    captured = _capture(model, obs)
    assert list(captured) == networks
    for layers in captured.values():
        assert [tuple(h.shape) for h in layers] == [(50, 16), (50, 8)]
        assert all((h >= -1.0).all() for h in layers)  # ELU outputs
    body = model.actor_body
    expected = body[1](body[0](model.normalize_obs(obs)))
    torch.testing.assert_close(captured[networks[0]][0], expected)
    assert all(not m._forward_hooks for m in model.modules())


@pytest.mark.parametrize("separate", [False, True])
def test_measure_reports_the_papers_metrics(separate):
    model = _model(separate)
    probe = Probe(CFG, model, seed=0)
    diag = probe.measure(0, _buffer(model))
    for key in ("feature_rank", "feature_rank_fraction", "dormant_fraction", "low_std_fraction", "ess",
                "policy_variance", "mu_variance", "weight_norm_actor", "weight_norm_critic", "coverage", "srank",
                "effective_rank"):
        assert key in diag, key
    assert ("feature_rank_critic" in diag) == separate
    assert 1 <= diag["feature_rank"] <= 8 and 0 < diag["feature_rank_fraction"] <= 1
    assert diag["ess"] == pytest.approx(1.0)  # the model is the behaviour policy: all weights equal
    assert 0 < diag["coverage"] <= 1 and 0 <= diag["dormant_fraction"] <= 1
    assert diag["policy_variance"] == pytest.approx(diag["mu_variance"] / 2)  # sigma is state-independent


def test_probe_is_due_every_interval_and_samples_its_own_stream():
    model = _model(False)
    probe = Probe(CFG, model, seed=0)
    assert [k for k in range(10) if probe.due(k)] == [0, 3, 6, 9]
    assert probe.measure(1, _buffer(model)) == {}
    state = torch.get_rng_state()
    probe.measure(3, _buffer(model))
    assert torch.equal(state, torch.get_rng_state())  # the global stream was not drawn from
    assert not Probe(dict(CFG, enabled=False), model, seed=0).due(0)


def test_gradient_kurtosis_is_the_mean_over_the_updates_steps_and_training_is_unchanged():
    from isaac_ppo.diagnostics.metrics import grad_kurtosis

    plain, probed = _model(True), _model(True)
    buf = _buffer(plain)
    probe = Probe(CFG, probed, seed=0)
    ppo_plain = PPO(plain, PPO_CFG, torch.device("cpu"), torch.Generator().manual_seed(5))
    ppo_probed = PPO(probed, PPO_CFG, torch.device("cpu"), torch.Generator().manual_seed(5))
    ppo_plain.update(buf, Plan(N, T, 2, 64))
    observer = probe.arm(0)
    per_step = []  # the actor's log-gradient kurtosis at each optimizer step, computed here on the side

    def both(model):
        actor = [p.grad.reshape(-1) for p in list(model.actor_body.parameters()) + list(model.mu.parameters())
                 + [model.log_std] if p.grad is not None]
        per_step.append(grad_kurtosis(actor))
        observer(model)

    ppo_probed.grad_observer = both
    ppo_probed.update(copy.deepcopy(buf), Plan(N, T, 2, 64))
    for a, b in zip(plain.parameters(), probed.parameters()):
        assert torch.equal(a, b)
    diag = probe.measure(0, buf)
    assert set(k for k in diag if k.startswith("grad_kurtosis")) == {"grad_kurtosis_actor", "grad_kurtosis_critic"}
    assert len(per_step) == 2 * (T * N // 64)  # 2 epochs of 4 minibatches
    assert diag["grad_kurtosis_actor"] == pytest.approx(sum(per_step) / len(per_step))
    assert diag["grad_kurtosis_actor"] != pytest.approx(per_step[0])  # not the first step's, where the ratio is 1
    assert probe.arm(1) is None  # not due: no observer


@pytest.mark.parametrize("key,value,message", [
    ("tau", 1.5, r"diagnostics.tau=1.5 is outside its domain: a number in \[0, 1\)"),
    ("tau", -0.1, r"diagnostics.tau=-0.1"),
    ("delta", 0.0, r"diagnostics.delta=0.0 is outside its domain: a number in \(0, 1\)"),
    ("interval_iterations", 0, r"diagnostics.interval_iterations=0 is outside its domain: an integer in \[1, inf\)"),
    ("grid", 0, r"diagnostics.grid=0"),
])
def test_settings_outside_their_domains_are_refused(key, value, message):
    """(declared with the run's other keys in config/checks.py RUN_DOMAINS)"""
    with pytest.raises(UserError, match=message):
        domains.check(domains.flat({"diagnostics": dict(CFG, **{key: value})}), RUN_DOMAINS)
    domains.check(domains.flat({"diagnostics": CFG}), RUN_DOMAINS)  # the defaults are inside


def test_too_few_samples_for_the_widest_layer_are_refused():
    with pytest.raises(UserError, match=r"diagnostics.samples=10 is below the widest hidden layer \(16 units\)"):
        check_diagnostics(OmegaConf.create(dict(CFG, samples=10)), [16, 8])


@pytest.mark.skipif(importlib.util.find_spec("umap") is not None, reason="umap-learn is installed here")
def test_umap_coverage_without_umap_learn_is_refused():
    with pytest.raises(UserError, match=r"diagnostics.coverage_method=umap needs umap-learn"):
        check_diagnostics(OmegaConf.create(dict(CFG, coverage_method="umap")), [16, 8])


# ------------------------------------------------------------------------------------------ probe set


def _probe_set(tmp_path, rows=64, task="Cartpole", num_obs=NUM_OBS):
    from isaac_ppo.diagnostics import probe_set

    path = str(tmp_path / "probe.pt")
    probe_set.save(path, torch.randn(rows, num_obs, generator=torch.Generator().manual_seed(3)), task, "a.pt")
    return path


def test_with_a_probe_set_every_run_is_measured_on_the_same_inputs(tmp_path):
    from isaac_ppo.diagnostics import metrics, probe_set

    path = _probe_set(tmp_path)
    model = _model(True)
    probe = Probe(dict(CFG, probe_set=path), model, seed=0, task="Cartpole")
    fixed = probe_set.load(path, "Cartpole")["obs"]
    first, other_batch = probe.measure(0, _buffer(model)), probe.measure(3, synthetic_buffer(model, T, N, seed=9))
    # recomputed here on the probe set's observations, through the model's own normaliser
    layers = _capture(model, fixed)
    assert first["feature_rank"] == metrics.feature_rank(layers["actor"][-1], CFG["delta"])["rank"]
    assert first["feature_rank_critic"] == metrics.feature_rank(layers["critic"][-1], CFG["delta"])["rank"]
    named = {f"{net}.{i}": h for net, hs in layers.items() for i, h in enumerate(hs)}
    assert first["low_std_fraction"] == metrics.dormant_fraction(named, CFG["tau"])["low_std_pooled"]
    mu, log_std, _ = model(fixed)
    assert first["policy_variance"] == pytest.approx(metrics.policy_variance(mu, log_std.exp())["policy_variance"])
    # another batch, the same inputs: the same rank, dormancy and policy variance
    for key in ("feature_rank", "feature_rank_critic", "dormant_fraction", "low_std_fraction", "policy_variance",
                "coverage"):
        assert first[key] == other_batch[key], key


def test_a_probe_set_that_cannot_serve_is_refused_in_one_line(tmp_path):
    from isaac_ppo.diagnostics import probe_set

    path = _probe_set(tmp_path)
    with pytest.raises(UserError, match=r"holds Cartpole observations, not Ant's"):
        probe_set.load(path, "Ant")
    with pytest.raises(UserError, match=r"holds 6-dimensional observations, the env gives 4"):
        Probe(dict(CFG, probe_set=path), ActorCritic(4, NUM_ACTIONS, [16, 8]), seed=0, task="Cartpole")
    torch.save({"something": "else"}, str(tmp_path / "other.pt"))
    with pytest.raises(UserError, match=r"other.pt is not a probe set"):
        probe_set.load(str(tmp_path / "other.pt"), "Cartpole")
    (tmp_path / "torn.pt").write_bytes(open(path, "rb").read()[:100])
    with pytest.raises(UserError, match=r"torn.pt cannot be read"):
        probe_set.load(str(tmp_path / "torn.pt"), "Cartpole")


def test_the_state_sampler_keeps_a_uniform_sample_of_the_whole_play_and_acts_as_the_policy():
    from isaac_ppo.diagnostics.probe_set import StateSampler

    counts = torch.zeros(100)
    for seed in range(20):
        sampler = StateSampler(lambda obs: obs[:, :1] * 2, samples=200, seed=seed)
        for t in range(100):
            obs = torch.full((8, 3), float(t))
            assert torch.equal(sampler(obs), obs[:, :1] * 2)
        states = sampler.sample()
        assert states.shape == (200, 3) and sampler.seen == 800
        counts += torch.bincount(states[:, 0].long(), minlength=100)
    # uniform over the 800 states: each step's 8 rows hold 2 of the 200 kept on average (20 plays: 40)
    assert counts.sum() == 4000
    assert counts[:50].sum() == pytest.approx(2000, rel=0.1) and counts[50:].sum() == pytest.approx(2000, rel=0.1)
    assert counts.min() > 15 and counts.max() < 70
    few = StateSampler(lambda obs: obs, samples=200, seed=0)
    few(torch.ones(5, 3))
    assert few.sample().shape == (5, 3)  # fewer seen than asked for: all of them
