"""Plan validation and the PPO update on a synthetic batch."""
from __future__ import annotations

import copy
import math

import pytest
import torch

from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.agent.ppo import LR_MAX, LR_MIN, PPO, NonFiniteLoss
from isaac_ppo.errors import UserError
from isaac_ppo.scheduler.plan import Plan

from helpers import record_minibatches, synthetic_buffer

NUM_OBS, NUM_ACTIONS, T, N = 5, 3, 8, 16
STATS_KEYS = {"actor_loss", "critic_loss", "entropy", "bounds_loss", "kl", "clip_fraction", "lr", "minibatches",
              "advantage_std"}


# ------------------------------------------------------------------------------------------ Plan


def test_plan_arithmetic():
    plan = Plan(num_envs=16, rollout_length=8, epochs=4, minibatch_size=32)
    assert plan.batch_size == 128
    assert plan.num_minibatches == 4
    assert Plan(3, 5, 1, 15).num_minibatches == 1
    assert plan.mode == "sync"


def test_plan_accepts_valid():
    plan = Plan(16, 8, 4, 32)
    assert plan.check(pool_size=16) is plan
    assert Plan(1, 1, 1, 1).check(pool_size=1).batch_size == 1
    assert Plan(4, 8, 2, 32).check(pool_size=16).num_minibatches == 1


@pytest.mark.parametrize("num_envs", [0, -1, 17])
def test_plan_refuses_num_envs(num_envs):
    with pytest.raises(UserError, match=r"num_envs=-?\d+ must be within 1\.\.16"):
        Plan(num_envs, 8, 4, 8).check(pool_size=16)


def test_plan_refuses_rollout_length_and_epochs():
    with pytest.raises(UserError, match=r"rollout_length=0 \(agent.horizon"):
        Plan(4, 0, 4, 1).check(pool_size=16)
    with pytest.raises(UserError, match=r"epochs=0 \(agent.mini_epochs"):
        Plan(4, 8, 0, 8).check(pool_size=16)


@pytest.mark.parametrize("minibatch", [5, 33, 0, 129])
def test_plan_refuses_minibatch_not_dividing(minibatch):
    with pytest.raises(UserError) as info:
        Plan(16, 8, 4, minibatch).check(pool_size=16)
    msg = str(info.value)
    assert f"agent.minibatch_size={minibatch}" in msg
    assert "128" in msg


# ------------------------------------------------------------------------------------------ PPO


def _cfg(**over):
    cfg = {
        "learning_rate": 3e-4, "lr_schedule": "constant", "kl_threshold": 0.008, "clip": 0.2, "clip_value": True,
        "critic_coef": 2.0, "entropy_coef": 0.01, "bounds_loss_coef": 0.0001, "truncate_grads": True,
        "grad_norm": 1.0, "normalize_advantage": True, "mixed_precision": True, "stale_correction": "none",
        "stale_update": "current", "stale_clip": "proximal", "stale_weight": "importance",
    }
    cfg.update(over)
    return cfg


def _model(seed=0, separate=False):
    torch.manual_seed(seed)
    return ActorCritic(NUM_OBS, NUM_ACTIONS, [32, 16], separate=separate, init_log_std=-0.5)


def _buffer(model, seed=1):
    return synthetic_buffer(model, T, N, seed)


def _params(model):
    return [p.detach().clone() for p in model.parameters()]


def _ppo(model, seed=2, **cfg):
    return PPO(model, _cfg(**cfg), torch.device("cpu"), torch.Generator().manual_seed(seed))


def test_update_stats_and_parameters_change():
    model = _model()
    buf = _buffer(model)
    before = _params(model)
    plan = Plan(N, T, 2, 32).check(N)
    stats = _ppo(model).update(buf, plan)
    assert set(stats) == STATS_KEYS
    assert stats["minibatches"] == 2 * 4
    for key, value in stats.items():
        assert math.isfinite(value), key
    assert stats["lr"] == pytest.approx(3e-4)
    assert stats["critic_loss"] > 0.0
    assert stats["kl"] >= -1e-6
    assert 0.0 <= stats["clip_fraction"] <= 1.0
    after = _params(model)
    changed = [not torch.equal(a, b) for a, b in zip(before, after)]
    assert all(changed), changed


def test_update_leaves_normalisers_frozen():
    model = _model()
    model.value_norm.update(torch.randn(50) * 3)
    model.obs_norm.update(torch.randn(50, NUM_OBS))
    norms = {k: v.clone() for k, v in model.state_dict().items() if "norm" in k}
    _ppo(model).update(_buffer(model), Plan(N, T, 2, 64))
    for k, v in model.state_dict().items():
        if "norm" in k:
            assert torch.equal(v, norms[k]), k


def test_first_minibatch_ratio_is_one():
    model = _model()
    buf = _buffer(model)
    stats = _ppo(model, clip=1e-4).update(buf, Plan(N, T, 1, T * N))
    assert stats["minibatches"] == 1
    assert stats["clip_fraction"] == 0.0
    assert abs(stats["kl"]) < 1e-6
    # a second update on the same (now stale) batch sees moved ratios, clipped at this tiny clip
    stats2 = _ppo(model, clip=1e-4, learning_rate=1e-2).update(buf, Plan(N, T, 1, T * N))
    assert stats2["clip_fraction"] > 0.0


def test_adaptive_lr_lowers_with_tiny_threshold():
    model = _model()
    ppo = _ppo(model, lr_schedule="adaptive", kl_threshold=1e-9, learning_rate=1e-3)
    stats = ppo.update(_buffer(model), Plan(N, T, 2, 32))
    assert stats["lr"] < 1e-3
    assert ppo.optimizer.param_groups[0]["lr"] == stats["lr"]


def test_adaptive_lr_raises_with_huge_threshold():
    model = _model()
    ppo = _ppo(model, lr_schedule="adaptive", kl_threshold=1e9, learning_rate=1e-4)
    stats = ppo.update(_buffer(model), Plan(N, T, 1, 64))  # 2 minibatches: 1e-4 * 1.5^2
    assert stats["lr"] == pytest.approx(1e-4 * 1.5 ** 2)
    assert ppo.optimizer.param_groups[0]["lr"] == stats["lr"]


def test_adaptive_lr_bounds():
    model = _model()
    ppo = _ppo(model, lr_schedule="adaptive", kl_threshold=1e9, learning_rate=5e-3)
    assert ppo.update(_buffer(model), Plan(N, T, 2, 16))["lr"] == LR_MAX == 1e-2
    model = _model()
    ppo = _ppo(model, lr_schedule="adaptive", kl_threshold=1e-9, learning_rate=1e-3)
    # 1e-3 / 1.5^n reaches the floor within the 32 minibatches, once the policy has moved off the batch's
    assert ppo.update(_buffer(model), Plan(N, T, 4, 16))["lr"] == LR_MIN == 1e-6
    # and directly: the adaptive rule never leaves [1e-6, 1e-2]
    ppo.set_lr(1.1e-6)
    ppo._adapt_lr(1.0)
    assert ppo.lr == LR_MIN
    ppo.set_lr(9e-3)
    ppo._adapt_lr(0.0)
    assert ppo.lr == LR_MAX
    ppo.set_lr(1e-4)
    ppo._adapt_lr(1e-9)  # within [threshold/2, 2 threshold]: unchanged
    assert ppo.lr == 1e-4


def test_standard_schedule_adapts_once_an_epoch_from_its_minibatches_mean_kl():
    """schedule_type=standard (rl-games', IsaacGymEnvs' hand configs): one adaptation after each epoch, from the mean
    of that epoch's minibatch KLs; legacy: one after every minibatch."""
    plan = Plan(N, T, 3, 16).check(N)  # 3 epochs of T * N / 16 minibatches
    per_epoch = T * N // 16
    model = _model()
    ppo = _ppo(model, lr_schedule="adaptive", kl_threshold=1e9, learning_rate=1e-4, schedule_type="standard")
    assert ppo.update(_buffer(model), plan)["lr"] == pytest.approx(1e-4 * 1.5 ** 3)
    model = _model()
    legacy = _ppo(model, lr_schedule="adaptive", kl_threshold=1e9, learning_rate=1e-4, schedule_type="legacy")
    assert legacy.update(_buffer(model), plan)["lr"] == pytest.approx(min(1e-4 * 1.5 ** (3 * per_epoch), LR_MAX))

    model = _model()
    ppo = _ppo(model, lr_schedule="adaptive", kl_threshold=1e-3, learning_rate=1e-3, schedule_type="standard")
    kls, adapted = [], []
    step = ppo._step

    def recorded_step(loss, riders):  # (riders: the minibatch's KL, then its loss)
        out = step(loss, riders)
        kls.append(float(out[0]))
        return out

    ppo._step, ppo._adapt_lr = recorded_step, adapted.append
    ppo.update(_buffer(model), plan)
    assert len(kls) == 3 * per_epoch and len(adapted) == 3
    for epoch, kl in enumerate(adapted):
        assert kl == pytest.approx(sum(kls[epoch * per_epoch:(epoch + 1) * per_epoch]) / per_epoch, rel=1e-6)


def test_constant_schedule_keeps_lr():
    model = _model()
    ppo = _ppo(model, lr_schedule="constant", kl_threshold=1e-9, learning_rate=1e-3)
    ppo.schedule_lr(0.5)
    assert ppo.update(_buffer(model), Plan(N, T, 2, 32))["lr"] == 1e-3


@pytest.mark.parametrize("k,max_k", [(0, 10), (3, 10), (9, 10), (10, 10), (12, 10)])
def test_linear_schedule(k, max_k):
    model = _model()
    ppo = _ppo(model, lr_schedule="linear", learning_rate=1e-3)
    ppo.schedule_lr(k / max_k)
    expected = 1e-3 * max(1.0 - k / max_k, 0.0)
    assert ppo.lr == pytest.approx(expected, abs=1e-15)
    assert all(g["lr"] == pytest.approx(expected, abs=1e-15) for g in ppo.optimizer.param_groups)
    # the linear schedule does not adapt inside the update
    stats = ppo.update(_buffer(model), Plan(N, T, 1, 32))
    assert stats["lr"] == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("field,value", [("returns", math.inf), ("advantages", math.nan), ("obs", math.nan)])
def test_non_finite_loss_raises_and_leaves_parameters(field, value):
    model = _model()
    buf = _buffer(model)
    getattr(buf, field)[0, 3] = value
    ppo = _ppo(model)
    before = _params(model)
    with pytest.raises(NonFiniteLoss, match="non-finite loss"):
        ppo.update(buf, Plan(N, T, 2, T * N))
    assert isinstance(NonFiniteLoss("x"), UserError)
    for a, b in zip(before, _params(model)):
        assert torch.equal(a, b)
    assert len(ppo.optimizer.state) == 0  # no optimiser step was taken


@pytest.mark.parametrize("separate", [False, True])
def test_update_is_deterministic(separate):
    results = []
    for _ in range(2):
        model = _model(seed=7, separate=separate)
        buf = _buffer(model, seed=8)
        ppo = _ppo(model, seed=9, lr_schedule="adaptive")
        stats = ppo.update(buf, Plan(N, T, 3, 32))
        results.append((_params(model), stats))
    (p1, s1), (p2, s2) = results
    assert s1 == s2
    for a, b in zip(p1, p2):
        assert torch.equal(a, b)


def test_update_depends_on_generator_seed():
    params = []
    for seed in (1, 2):
        model = _model(seed=7)
        _ppo(model, seed=seed).update(_buffer(model, seed=8), Plan(N, T, 2, 32))
        params.append(_params(model))
    assert any(not torch.equal(a, b) for a, b in zip(*params))


# ------------------------------------------------------------------------------------------ stale batches


def _stale_setup():
    """A batch collected by a behaviour policy, and a model that has moved on by one (simulated) update."""
    model = _model()
    buf = _buffer(model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(9)))
    return model, buf


@pytest.mark.parametrize("stale_clip", ["behaviour", "proximal"])
def test_stale_batch_kl_is_the_updates_own_step(stale_clip):
    model, buf = _stale_setup()
    as_fresh = _ppo(copy.deepcopy(model), learning_rate=1e-9, stale_clip=stale_clip).update(buf, Plan(N, T, 1, 32))
    as_stale = _ppo(model, learning_rate=1e-9, stale_clip=stale_clip).update(buf, Plan(N, T, 1, 32), stale=True)
    # with a learning rate of ~0 the update itself moves nothing: only the behaviour gap shows as KL
    assert as_fresh["kl"] > 1e-3
    assert as_stale["kl"] < 1e-9


def test_proximal_clipping_centres_the_ratio_on_the_updates_start():
    model, buf = _stale_setup()
    behaviour = _ppo(copy.deepcopy(model), learning_rate=1e-9, stale_clip="behaviour")
    proximal = _ppo(copy.deepcopy(model), learning_rate=1e-9, stale_clip="proximal")
    assert behaviour.update(buf, Plan(N, T, 1, 32), stale=True)["clip_fraction"] > 0.05  # pi / pi_behaviour
    assert proximal.update(buf, Plan(N, T, 1, 32), stale=True)["clip_fraction"] == 0.0  # pi / pi_prox = 1


def _kl(mu_old, log_std_old, mu_new, log_std_new):
    """KL(old || new) of diagonal Gaussians written out, averaged over rows."""
    terms = (log_std_new - log_std_old
             + ((2 * log_std_old).exp() + (mu_old - mu_new) ** 2) / (2 * (2 * log_std_new).exp()) - 0.5)
    return float(terms.sum(-1).mean())


def test_kl_since_the_previous_epoch_is_each_rows_change_since_its_last_minibatch():
    """agent.kl_reference=previous_epoch (rl-games' update_mu_sigma): a minibatch's KL is measured from the means
    and log-std its rows had when this update last computed them (an epoch before, in another minibatch: ours are
    reshuffled), from the batch's own in the first epoch; update_start's from the batch's own throughout."""
    model = _model()
    buf = _buffer(model)
    plan = Plan(N, T, 3, 32).check(N)
    ppo = _ppo(model, kl_reference="previous_epoch", learning_rate=3e-3, mixed_precision=False)
    seen = record_minibatches(ppo)
    ppo.update(buf, plan)
    batch = buf.flat()
    ref_mu = batch["mu"].float().clone()
    ref_log_std = buf.log_std.float().expand_as(ref_mu).clone()
    per_epoch = plan.num_minibatches
    assert len(seen) == 3 * per_epoch
    for k, mb in enumerate(seen):
        ids, mu, log_std, kl = mb["ids"], mb["mu"], mb["log_std"], mb["kl"]
        assert kl == pytest.approx(_kl(ref_mu[ids], ref_log_std[ids], mu, log_std), rel=1e-5, abs=1e-9), k
        if k >= per_epoch:  # the reference was moved: not the update's start any more
            start = _kl(batch["mu"][ids], buf.log_std.expand_as(mu), mu, log_std)
            assert kl < start, (k, kl, start)
        ref_mu[ids], ref_log_std[ids] = mu, log_std
    assert sorted(torch.cat([mb["ids"] for mb in seen[:per_epoch]]).tolist()) == list(range(plan.batch_size))  # each row once an epoch


def test_kl_references_agree_in_the_first_epoch():
    """One epoch: both references are the batch's own policy, so the same seed gives the same update."""
    plan = Plan(N, T, 1, 32).check(N)
    results = []
    for reference in ("update_start", "previous_epoch"):
        model = _model()
        buf = _buffer(model)
        ppo = _ppo(model, kl_reference=reference, lr_schedule="adaptive", kl_threshold=1e-4, learning_rate=1e-3)
        stats = ppo.update(buf, plan)
        results.append((stats["kl"], stats["lr"], _params(model)))
    (kl_a, lr_a, params_a), (kl_b, lr_b, params_b) = results
    assert kl_a == pytest.approx(kl_b, rel=1e-6) and lr_a == lr_b
    assert all(torch.equal(a, b) for a, b in zip(params_a, params_b))
