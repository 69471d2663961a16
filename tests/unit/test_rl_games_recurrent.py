"""rl-games' recurrent networks (its rnn block) against ours: a .pth of one plays through our player with the same
actions, step by step over episodes that end, and rl-games' own network acts through RlGamesPolicy the same way
(agent=rl_games' evaluation). Random weights and statistics: the mapping, not the learning, is under test."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from isaac_ppo.agent.acting import Acting
from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.errors import UserError
from isaac_ppo.io import rlgames_checkpoint
from isaac_ppo.loop.rlgames import RlGamesPolicy

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")  # (torch >= 2.11 deprecates jit; rl-games scripts a helper)
NUM_OBS, NUM_ACTIONS, HIDDEN = 6, 2, [24, 16]
CASES = {
    "shared_lstm_before_mlp_layer_norm": dict(separate=False, rnn=dict(name="lstm", units=12, layers=1,
                                                                        before_mlp=True, layer_norm=True)),
    "separate_gru_after_mlp_concat_input": dict(separate=True, rnn=dict(name="gru", units=10, layers=2,
                                                                         before_mlp=False, concat_input=True)),
    "separate_lstm_after_mlp": dict(separate=True, rnn=dict(name="lstm", units=8, layers=1)),
}


def rl_games_model(case):
    from rl_games.algos_torch.model_builder import ModelBuilder

    params = {
        "model": {"name": "continuous_a2c_logstd"},
        "network": {"name": "actor_critic", "separate": case["separate"],
                    "space": {"continuous": {"mu_activation": "None", "sigma_activation": "None",
                                             "mu_init": {"name": "default"},
                                             "sigma_init": {"name": "const_initializer", "val": 0.0},
                                             "fixed_sigma": True}},
                    "mlp": {"units": HIDDEN, "activation": "elu", "d2rl": False,
                            "initializer": {"name": "default"}, "regularizer": {"name": "None"}},
                    "rnn": case["rnn"]},
    }
    model = ModelBuilder().load(params).build({
        "actions_num": NUM_ACTIONS, "input_shape": (NUM_OBS,), "num_seqs": 3, "value_size": 1,
        "normalize_value": True, "normalize_input": True})
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for tensor in model.parameters():
            tensor.copy_(0.4 * torch.randn(tensor.shape, generator=generator))
        for stats in (model.running_mean_std, model.value_mean_std):
            stats.running_mean.copy_(torch.randn(stats.running_mean.shape, generator=generator, dtype=torch.float64))
            stats.running_var.copy_(torch.rand(stats.running_var.shape, generator=generator, dtype=torch.float64) + 0.5)
    return model.eval()


@pytest.mark.parametrize("name", list(CASES))
def test_a_recurrent_pth_plays_with_rl_games_own_actions_step_by_step(name, tmp_path):
    pytest.importorskip("rl_games")
    case = CASES[name]
    theirs = rl_games_model(case)
    path = tmp_path / "recurrent.pth"
    torch.save({"model": theirs.state_dict(), "epoch": 1, "frame": 1}, path)
    env = SimpleNamespace(num_obs=NUM_OBS, num_actions=NUM_ACTIONS)
    feed_forward = ActorCritic(NUM_OBS, NUM_ACTIONS, HIDDEN, separate=case["separate"])
    with pytest.raises(UserError, match=r"holds another network \(rnn\.name \w+ there, null here, .*\): "
                                        r"play it with agent\.network\.rnn\.name=\w+ agent\.network\.rnn\.units=\d+"):
        rlgames_checkpoint.load_model(feed_forward, str(path), env, "Toy")
    ours = ActorCritic(NUM_OBS, NUM_ACTIONS, HIDDEN, separate=case["separate"], rnn=case["rnn"]).eval()
    rlgames_checkpoint.load_model(ours, str(path), env, "Toy")
    their_policy = Acting(RlGamesPolicy(SimpleNamespace(model=theirs)))
    our_policy = Acting(ours)
    generator = torch.Generator().manual_seed(2)
    worst = 0.0
    with torch.no_grad():
        for step in range(50):
            obs = torch.randn(3, NUM_OBS, generator=generator)
            worst = max(worst, float((their_policy(obs) - our_policy(obs)).abs().max()))
            ended = torch.rand(3, generator=generator) < 0.15
            their_policy.episodes_ended(ended)
            our_policy.episodes_ended(ended)
    assert worst < 1e-5, worst
    assert not torch.equal(our_policy.hidden, torch.zeros_like(our_policy.hidden))  # (a state was carried)
