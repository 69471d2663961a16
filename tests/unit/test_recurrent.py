"""Recurrent actor-critics (agent/recurrent.py, agent/model.py): the chunked, masked forward of PPO's minibatches
against a step-by-step replay of the rollout, the state the collector carries, the time-out bootstrap's state,
the update over chunks, and a feed-forward model untouched."""
from __future__ import annotations

import pytest
import torch

from isaac_ppo.agent.acting import Acting
from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.agent.ppo import PPO
from isaac_ppo.agent.recurrent import chunk_count, masked_mean, to_sequences, unroll
from isaac_ppo.loop.collect import SyncCollector
from isaac_ppo.scheduler.plan import Plan

from helpers import record_minibatches

NUM_OBS, NUM_ACTIONS, NUM_STATES, ENVS = 5, 2, 7, 6
GAMMA = 0.9
# where an episode ends (env, step): inside chunks and at their edges, and time-outs among them
ENDS = {(0, 1), (0, 4), (1, 2), (2, 5), (3, 3), (3, 4), (4, 6)}
TIME_OUTS = {(0, 4), (2, 5), (4, 6)}

RNNS = {
    "lstm_after_concat": dict(name="lstm", units=8, layers=2, concat_input=True),
    "gru_before_norm": dict(name="gru", units=8, before_mlp=True, layer_norm=True),
}


class ScriptedEnv:
    """Random observations, scripted episode ends (ENDS) and time-outs, a final observation for each time-out; its
    own critic observations when num_states."""

    device = "cpu"

    def __init__(self, num_states: int = 0, final_obs: bool = True):
        self.num_envs, self.num_obs, self.num_actions, self.num_states = ENVS, NUM_OBS, NUM_ACTIONS, num_states
        self.g = torch.Generator().manual_seed(3)
        self.t, self.final_obs = 0, final_obs
        self.log = []

    def _obs(self):
        out = {"obs": torch.randn(ENVS, NUM_OBS, generator=self.g)}
        if self.num_states:
            out["states"] = torch.randn(ENVS, self.num_states, generator=self.g)
        return out

    def reset(self):
        return self._obs()

    def step(self, actions):
        resets = torch.tensor([(i, self.t) in ENDS for i in range(ENVS)])
        time_outs = torch.tensor([(i, self.t) in TIME_OUTS for i in range(ENVS)])
        extras = {"time_outs": time_outs}
        if self.final_obs:
            extras["final_obs"] = 3.0 + torch.randn(ENVS, NUM_OBS, generator=self.g)
            if self.num_states:
                extras["final_states"] = torch.randn(ENVS, self.num_states, generator=self.g)
        obs = self._obs()
        self.log.append(dict(extras, resets=resets))
        self.t += 1
        return obs, torch.ones(ENVS), resets, extras


def _model(rnn, seed=0, num_states=0, separate=False):
    torch.manual_seed(seed)
    model = ActorCritic(NUM_OBS, NUM_ACTIONS, [16, 12], separate=separate, num_states=num_states, rnn=rnn)
    model.obs_norm.update(torch.randn(64, NUM_OBS) * 2 + 1)
    model.value_norm.update(torch.randn(64) * 4 + 10)
    return model


def _collect(model, rollout, seq_length, env=None):
    env = env or ScriptedEnv(model.num_states)
    collector = SyncCollector(env, model, GAMMA, 1.0, torch.Generator().manual_seed(7), seq_length=seq_length)
    buf, info = collector.collect(Plan(ENVS, rollout, 1, ENVS * rollout))
    return env, collector, buf, info


def _ppo_cfg(**over):
    cfg = {"learning_rate": 1e-3, "mixed_precision": False, "normalize_advantage": True, "clip": 0.2,
           "clip_value": True, "critic_coef": 2.0, "entropy_coef": 0.0, "bounds_loss_coef": 1e-4,
           "truncate_grads": True, "grad_norm": 1.0, "lr_schedule": "constant", "kl_threshold": 0.008,
           "stale_correction": "none", "stale_update": "current", "stale_clip": "behaviour",
           "stale_weight": "importance"}
    cfg.update(over)
    return cfg


def _replay(model, buf, env_log=None):
    """The rollout replayed one step at a time from zeros, the state zeroed after each episode end: the means,
    values and (with env_log) the critic's values of the time-outs' final observations."""
    hidden = model.initial_state(ENVS)
    mus, values, finals = [], [], []
    with torch.no_grad():
        for t in range(buf.rollout_length):
            states = buf.states[t] if buf.states is not None else None
            mu, _, value, hidden = model.step(buf.obs[t], states, hidden)
            mus.append(mu)
            values.append(model.denormalize_value(value))
            if env_log is not None and t < len(env_log):
                step = env_log[t]
                final_states = step.get("final_states")
                finals.append(model.denormalize_value(model.step(step["final_obs"], final_states, hidden)[2]))
            hidden = hidden * (1.0 - buf.dones[t]).unsqueeze(-1)
    return torch.stack(mus), torch.stack(values), finals


@pytest.mark.parametrize("rnn", list(RNNS), ids=list(RNNS))
@pytest.mark.parametrize("rollout,seq_length", [(8, 4), (7, 3)], ids=["chunks_divide", "last_chunk_padded"])
def test_the_chunked_masked_forward_equals_a_step_by_step_replay(rnn, rollout, seq_length):
    """PPO's minibatch forward (whole chunks from their stored states, zeroed inside a chunk where an episode ended)
    gives the means and values the collector acted with, step by step; handing the state across an episode end
    instead (the classic bug) gives others, where an episode ended inside a chunk."""
    model = _model(RNNS[rnn], separate=True)
    env, _, buf, _ = _collect(model, rollout, seq_length)
    mus, values, _ = _replay(model, buf)
    torch.testing.assert_close(buf.mu, mus, rtol=0, atol=1e-6)  # the collector acted as the replay does
    torch.testing.assert_close(buf.values, values, rtol=1e-6, atol=1e-5)
    data = buf.sequences({"obs": buf.obs.view(rollout * ENVS, -1), "mu": buf.mu.view(rollout * ENVS, -1)})
    assert data["hidden"].shape == (chunk_count(rollout, seq_length) * ENVS, model.state_size)
    with torch.no_grad():
        mu, _, _ = unroll(model, data["obs"], None, data["hidden"], data["starts"])
        valid = data["valid"].bool()
        assert int(valid.sum()) == rollout * ENVS  # every step once, padding aside
        torch.testing.assert_close(mu[valid], data["mu"][valid], rtol=0, atol=1e-6)
        # the state handed across episode ends inside chunks: other means after them
        crossed, _, _ = unroll(model, data["obs"], None, data["hidden"], torch.zeros_like(data["starts"]))
    inside = (data["starts"] > 0) & valid  # steps after an episode end within the same chunk
    assert int(inside.sum()) >= 3, "the script must end episodes inside chunks"
    assert float((crossed[inside] - data["mu"][inside]).abs().max()) > 1e-3


def test_the_stored_states_are_each_chunks_first_states_and_the_collector_keeps_the_last():
    model = _model(RNNS["lstm_after_concat"])
    env, collector, buf, _ = _collect(model, 7, 3)
    hidden = model.initial_state(ENVS)
    with torch.no_grad():
        for t in range(7):
            if t % 3 == 0:
                torch.testing.assert_close(buf.hidden[t // 3], hidden, rtol=0, atol=1e-6)
            hidden = model.step(buf.obs[t], None, hidden)[3] * (1.0 - buf.dones[t]).unsqueeze(-1)
    torch.testing.assert_close(collector.hidden, hidden, rtol=0, atol=1e-6)
    assert bool((collector.hidden[4] == 0).all())  # env 4's episode ended at the last step: zeroed


@pytest.mark.parametrize("final_obs", [True, False], ids=["final_obs", "terminal_obs_returned"])
def test_a_time_outs_bootstrap_is_the_critic_on_its_final_observation_from_the_state_that_reached_it(final_obs):
    """With final_obs (MuJoCo's ports) and without it (Isaac Gym returns the terminal observation): the value of
    the observation that ended the episode, stepped from the state before it is zeroed; with the critic
    observations of an asymmetric env."""
    model = _model(RNNS["lstm_after_concat"], num_states=NUM_STATES)
    env = ScriptedEnv(NUM_STATES, final_obs=final_obs)
    env, _, buf, _ = _collect(model, 7, 3, env)
    log = env.log
    if not final_obs:  # the terminal observation is the next one returned
        log = [dict(step, final_obs=buf.obs[t + 1] if t + 1 < 7 else None,
                    final_states=buf.states[t + 1] if t + 1 < 7 else None) for t, step in enumerate(env.log)]
        log = log[:6]
    _, _, finals = _replay(model, buf, log)
    for t, final in enumerate(finals):
        for i in range(ENVS):
            if (i, t) in TIME_OUTS:
                expected = 1.0 + GAMMA * float(final[i])
                assert float(buf.rewards[t, i]) == pytest.approx(expected, rel=1e-5), (t, i)
            else:
                assert float(buf.rewards[t, i]) == 1.0


@pytest.mark.parametrize("rnn", list(RNNS), ids=list(RNNS))
@pytest.mark.parametrize("stale_clip", [None, "behaviour", "proximal"])
def test_the_update_over_chunks_trains_every_part_and_takes_the_plans_minibatch_count(rnn, stale_clip):
    model = _model(RNNS[rnn], num_states=NUM_STATES)
    _, _, buf, info = _collect(model, 7, 3)
    buf.compute_gae(info["last_values"], GAMMA, 0.95)
    ppo = PPO(model, _ppo_cfg(stale_clip=stale_clip or "behaviour"), torch.device("cpu"),
              torch.Generator().manual_seed(1))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    stats = ppo.update(buf, Plan(ENVS, 7, 2, 21), stale=stale_clip is not None)  # 42 transitions, 2 minibatches
    assert stats["minibatches"] == 2 * 2
    assert all(map(lambda v: v == v, stats.values()))  # (no NaN)
    unchanged = [name for name, p in model.named_parameters() if torch.equal(p, before[name])]
    assert not unchanged, unchanged


@pytest.mark.parametrize("rnn", list(RNNS), ids=list(RNNS))
def test_a_chunks_kl_since_the_previous_epoch_is_measured_from_its_own_last_unroll(rnn):
    """agent.kl_reference=previous_epoch over chunks: a minibatch's KL (padding masked) is measured from the means
    its chunks had at their previous unroll, an epoch before; in the first epoch from the batch's own."""
    model = _model(RNNS[rnn], num_states=NUM_STATES)
    _, _, buf, info = _collect(model, 7, 3)
    buf.compute_gae(info["last_values"], GAMMA, 0.95)
    ppo = PPO(model, _ppo_cfg(learning_rate=3e-3, kl_reference="previous_epoch"), torch.device("cpu"),
              torch.Generator().manual_seed(1))
    seen = record_minibatches(ppo)
    ppo.update(buf, Plan(ENVS, 7, 3, 21))  # 2 minibatches of chunks an epoch, 3 epochs
    ref_mu = buf.sequences({"mu": buf.flat()["mu"]})["mu"].float().clone()  # (steps of a chunk, chunks, actions)
    ref_log_std = buf.log_std.float().expand_as(ref_mu).clone()
    assert len(seen) == 6
    for k, mb in enumerate(seen):
        ids, mu, log_std, valid = mb["ids"], mb["mu"], mb["log_std"], mb["valid"]
        old_mu, old_log_std = ref_mu[:, ids], ref_log_std[:, ids]
        terms = (log_std - old_log_std + ((2 * old_log_std).exp() + (old_mu - mu) ** 2)
                 / (2 * (2 * log_std).exp()) - 0.5).sum(-1)
        assert mb["kl"] == pytest.approx(float((terms * valid).sum() / valid.sum()), rel=1e-5, abs=1e-9), k
        ref_mu[:, ids], ref_log_std[:, ids] = mu, log_std


def test_masked_mean_counts_the_valid_steps_only():
    x = torch.tensor([[1.0, 2.0], [30.0, 4.0]])
    assert float(masked_mean(x, torch.tensor([[1.0, 1.0], [0.0, 1.0]]))) == pytest.approx(7.0 / 3.0)
    assert float(masked_mean(x, None)) == pytest.approx(37.0 / 4.0)


def test_to_sequences_lays_out_each_envs_chunks_and_pads_the_last():
    x = torch.arange(5 * 2).view(5, 2).float()  # x[t, n] = 2t + n
    seq = to_sequences(x, 2)  # 3 chunks of 2 steps, for 2 envs: column c * 2 + n
    assert seq.shape == (2, 6)
    assert seq[:, 0].tolist() == [0.0, 2.0] and seq[:, 1].tolist() == [1.0, 3.0]  # chunk 0 of env 0, env 1
    assert seq[:, 4].tolist() == [8.0, 0.0] and seq[:, 5].tolist() == [9.0, 0.0]  # the last: one step and padding


def test_a_feed_forward_step_is_its_forward_and_carries_no_state():
    torch.manual_seed(0)
    model = ActorCritic(NUM_OBS, NUM_ACTIONS, [16, 12])
    obs = torch.randn(4, NUM_OBS)
    assert model.initial_state(4) is None and model.state_size == 0 and not model.recurrent
    mu, log_std, value, hidden = model.step(obs, None, None)
    expected = model(obs)
    assert torch.equal(mu, expected[0]) and torch.equal(value, expected[2]) and hidden is None
    with pytest.raises(TypeError, match="acts with step"):
        _model(RNNS["gru_before_norm"])(obs)


def test_acting_zeroes_the_state_of_envs_whose_episode_ended():
    model = _model(RNNS["lstm_after_concat"])
    policy = Acting(model)
    obs = torch.randn(3, NUM_OBS)
    with torch.no_grad():
        first = policy(obs)
        policy(obs)
        policy.episodes_ended(torch.tensor([True, False, False]))
        again = policy(obs)
    assert torch.equal(again[0], first[0])  # env 0 starts afresh: as the first step
    assert not torch.allclose(again[1:], first[1:])  # the others carry their state
