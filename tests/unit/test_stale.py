"""Learning from a one-update-stale batch (agent/stale.py): V-trace's correction and HTS-RL's delayed update."""
import torch

from helpers import synthetic_buffer
from isaac_ppo.agent.model import ActorCritic, gaussian_log_prob
from isaac_ppo.agent.ppo import PPO
from isaac_ppo.agent.rollout import RolloutBuffer
from isaac_ppo.agent.stale import delayed_update, stale_weights, vtrace, weight_of
from isaac_ppo.scheduler.plan import Plan

T, N = 8, 6
CFG = {"learning_rate": 1e-3, "lr_schedule": "constant", "kl_threshold": 0.008, "clip": 0.2, "clip_value": True,
       "critic_coef": 2.0, "entropy_coef": 0.0, "bounds_loss_coef": 0.0001, "truncate_grads": True, "grad_norm": 1.0,
       "normalize_advantage": True, "mixed_precision": False, "stale_correction": "none", "stale_update": "current",
       "stale_clip": "behaviour", "stale_weight": "importance", "gamma": 0.99, "lam": 0.95}


def test_vtrace_with_every_ratio_one_is_gae():
    g = torch.Generator().manual_seed(0)
    buf = RolloutBuffer(T, N, 3, 2, torch.device("cpu"))
    buf.rewards.copy_(torch.randn(T, N, generator=g))
    buf.values.copy_(torch.randn(T, N, generator=g))
    buf.dones.copy_((torch.rand(T, N, generator=g) < 0.2).float())
    last = torch.randn(N, generator=g)
    buf.compute_gae(last, 0.99, 0.95)
    advantages, returns = vtrace(buf.rewards, buf.dones, buf.values, last, torch.zeros(T, N), 0.99, 0.95)
    torch.testing.assert_close(advantages, buf.advantages)
    torch.testing.assert_close(returns, buf.returns)


def test_vtrace_truncates_the_weights_at_one_by_hand():
    # gamma 0.5, lambda 1; V = 1, 2, bootstrap 4; rewards 1, 2; pi / mu = 2 (rho and c cut to 1), then 0.5.
    # t=1: delta = 2 + 0.5 * 4 - 2 = 2, advantage 0.5 * 2 = 1 (target 3);
    # t=0: delta = 1 + 0.5 * 2 - 1 = 1, advantage 1 * 1 + 0.5 * 1 * 1 = 1.5 (target 2.5)
    log_ratio = torch.log(torch.tensor([[2.0], [0.5]]))
    advantages, returns = vtrace(torch.tensor([[1.0], [2.0]]), torch.zeros(2, 1), torch.tensor([[1.0], [2.0]]),
                                 torch.tensor([4.0]), log_ratio, 0.5, 1.0)
    assert advantages.flatten().tolist() == [1.5, 1.0] and returns.flatten().tolist() == [2.5, 3.0]
    # an episode ending at t=0 cuts both the bootstrap and the trace: advantage r0 - V0 = 0
    advantages, _ = vtrace(torch.tensor([[1.0], [2.0]]), torch.tensor([[1.0], [0.0]]), torch.tensor([[1.0], [2.0]]),
                           torch.tensor([4.0]), log_ratio, 0.5, 1.0)
    assert advantages.flatten().tolist() == [0.0, 1.0]


def _model(seed):
    torch.manual_seed(seed)
    return ActorCritic(5, 2, [16], init_log_std=-0.5)


def test_a_stale_batch_of_the_same_policy_is_learned_as_without_vtrace_and_its_lag_is_zero():
    """Where the update-start policy is the behaviour policy, V-trace's weights are all 1 (GAE), the values are
    replaced by the critic's own, and the lag measured is nil; against another policy it is not."""
    model = _model(0)
    buf = synthetic_buffer(model, T, N)
    with torch.no_grad():
        buf.values.copy_(model.denormalize_value(model(buf.obs)[2]))  # the behaviour critic's values
    buf.compute_gae(torch.zeros(N), 0.99, 0.95)
    plan = Plan(N, T, 2, 24)
    stats = {}
    for correction in ("none", "vtrace"):
        twin = _model(0)
        stats[correction] = PPO(twin, dict(CFG, stale_correction=correction), torch.device("cpu"),
                                torch.Generator().manual_seed(1)).update(buf, plan, stale=True)
    for key in ("actor_loss", "critic_loss", "kl", "advantage_std"):
        assert abs(stats["none"][key] - stats["vtrace"][key]) < 1e-5, key
    assert stats["vtrace"]["stale_kl"] == 0.0 and stats["vtrace"]["stale_clip_fraction"] == 0.0
    moved = PPO(_model(3), dict(CFG, stale_correction="vtrace"), torch.device("cpu"),
                torch.Generator().manual_seed(1)).update(buf, plan, stale=True)
    assert moved["stale_kl"] > 0.0 and moved["advantage_std"] != stats["vtrace"]["advantage_std"]


def test_the_delayed_update_adds_the_step_taken_at_the_behaviour_parameters_to_the_current_ones():
    model = _model(0)
    current = {name: p.detach().clone() for name, p in model.named_parameters()}
    behaviour = {name: value + 1.0 for name, value in current.items()}

    def doubles():  # an update whose step from theta_b is theta_b itself
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(2.0)
        return {"kl": 0.0}

    assert delayed_update(model, behaviour, doubles) == {"kl": 0.0}
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), current[name] + behaviour[name])


def test_ppo_runs_the_delayed_update_from_the_behaviour_parameters():
    """agent.stale_update=delayed: the same step as a fresh update of the behaviour policy, applied to the current
    parameters."""
    behaviour_model = _model(0)
    buf = synthetic_buffer(behaviour_model, T, N)
    buf.compute_gae(torch.zeros(N), 0.99, 0.95)
    behaviour = {name: p.detach().clone() for name, p in behaviour_model.named_parameters()}
    plan = Plan(N, T, 2, 24)
    PPO(behaviour_model, CFG, torch.device("cpu"), torch.Generator().manual_seed(1)).update(buf, plan)
    current = _model(3)
    start = {name: p.detach().clone() for name, p in current.named_parameters()}
    stats = PPO(current, dict(CFG, stale_update="delayed"), torch.device("cpu"),
                torch.Generator().manual_seed(1)).update(buf, plan, stale=True, behaviour=behaviour)
    assert stats["stale_kl"] > 0.0
    for name, p in current.named_parameters():
        step = dict(behaviour_model.named_parameters())[name].detach() - behaviour[name]
        torch.testing.assert_close(p.detach(), start[name] + step)


def test_the_proximal_clips_importance_weight_whole_truncated_or_none_by_hand():
    log_ratio = torch.log(torch.tensor([2.0, 0.5, 1.0]))
    torch.testing.assert_close(stale_weights(log_ratio, "importance"), torch.tensor([2.0, 0.5, 1.0]))
    torch.testing.assert_close(stale_weights(log_ratio, "truncated"), torch.tensor([1.0, 0.5, 1.0]))
    torch.testing.assert_close(stale_weights(log_ratio, "none"), torch.ones(3))


def test_the_unweighted_proximal_update_is_ppo_against_the_update_start_policy():
    """agent.stale_weight=none (APPO's surrogate): learning a stale batch is exactly a fresh PPO update of a batch
    whose behaviour policy were the update-start one (same actions, advantages and targets); with the importance
    weight it is not."""
    buf = synthetic_buffer(_model(0), T, N)  # collected by the behaviour policy (seed 0)
    start = _model(3)  # the policy the update starts from
    as_if_fresh = synthetic_buffer(_model(0), T, N)
    with torch.no_grad():
        mu = start(as_if_fresh.obs)[0]
        as_if_fresh.mu.copy_(mu)
        as_if_fresh.log_std.copy_(start.log_std)
        as_if_fresh.log_probs.copy_(gaussian_log_prob(as_if_fresh.actions, mu, start.log_std))
    plan = Plan(N, T, 2, 24)
    cfg = dict(CFG, stale_clip="proximal")
    fresh = PPO(_model(3), cfg, torch.device("cpu"), torch.Generator().manual_seed(1)).update(as_if_fresh, plan)
    stats = {weight: PPO(_model(3), dict(cfg, stale_weight=weight), torch.device("cpu"),
                         torch.Generator().manual_seed(1)).update(buf, plan, stale=True)
             for weight in ("none", "importance")}
    assert stats["none"]["stale_kl"] > 0.0  # the two policies differ
    for key in ("actor_loss", "critic_loss", "kl", "clip_fraction"):
        assert abs(stats["none"][key] - fresh[key]) < 1e-6, key
    assert abs(stats["importance"]["actor_loss"] - fresh["actor_loss"]) > 1e-4


def test_the_automatic_weight_is_none_under_vtrace_and_whole_without_it():
    auto = dict(CFG, stale_weight="auto", stale_correction="auto")
    assert weight_of(auto, recurrent=False) == "none"  # V-trace corrects the advantages: APPO's surrogate
    assert weight_of(auto, recurrent=True) == "importance"  # no V-trace for a recurrent network
    assert weight_of(dict(auto, stale_update="delayed"), recurrent=False) == "importance"
    assert weight_of(dict(auto, stale_correction="none"), recurrent=False) == "importance"
    assert weight_of(dict(auto, stale_weight="truncated"), recurrent=False) == "truncated"
