"""rl-games checkpoints (IsaacGymEnvs' runs/<name>/nn/*.pth) read into our ActorCritic, for play.

A .pth is what rl-games' ``torch_ext.save_checkpoint`` writes: ``{'model': state_dict, 'epoch', 'frame',
'optimizer', ...}``, the state_dict of its ``continuous_a2c_logstd`` model around an ``actor_critic`` network
(IsaacGymEnvs' models): ``a2c_network.actor_mlp.{0,2,..}`` (Linear, activation pairs, as our ``actor_body``),
``a2c_network.critic_mlp`` (``separate: True`` only), ``a2c_network.mu``, ``a2c_network.value``,
``a2c_network.sigma`` (fixed sigma: the log-std, which the model exponentiates, as our ``log_std``),
``running_mean_std.{running_mean, running_var, count}`` (normalize_input) and ``value_mean_std.*``
(normalize_value); a model rl-games compiled (``torch_compile``) prefixes every key with ``_orig_mod.``.

The normalisers are reproduced: rl-games' RunningMeanStd and ours both keep float64 mean and variance, use
epsilon 1e-5 and map obs to clamp((x - mean) / sqrt(var + 1e-5), -5, 5). Two differences, neither seen by play:
rl-games rounds var to float32 before adding epsilon and taking the root, ours after (float32 rounding: up to
1e-6 in a normalised observation, 7e-7 in the mean action, tests/integration/test_rl_games_checkpoint.py), and
its value normaliser clamps normalised values to +-5 when denormalising (ours does not clip them): play uses the
mean action only. What a state_dict cannot tell is assumed to be IsaacGymEnvs': the ``continuous_a2c_logstd``
model (sigma is a log-std; rl-games' ``continuous_a2c`` stores the same keys with sigma a std, which would change
only sampled actions), ``mu_activation``, ``sigma_activation`` and ``value_activation`` None, and the hidden
activation is the configured ``agent.network.activation``.
A recurrent network (rl-games' rnn block: its LSTMWithDones or GRUWithDones around a torch LSTM or GRU) maps
onto ours the same way: ``a2c_network.rnn.rnn.*`` and ``a2c_network.layer_norm.*`` (shared) or
``a2c_network.{a,c}_rnn.rnn.*`` and ``a2c_network.{a,c}_layer_norm.*`` (separate) are our ``actor_rnn`` /
``critic_rnn`` (``.rnn.*``, ``.norm.*``); the kind (4 or 3 gates), units, layers, layer norm, and where it sits
(before the MLP, or after it over the MLP's output and with concat_input the observation) are read from the shapes.
Refused in one line: a network we cannot hold (state-dependent sigma, CNN, D2RL, dict observations, concat_output,
a critic over other inputs) and one whose sizes or normalisers differ from the configured network (the message
names the overrides that build it).
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping

import torch

from isaac_ppo.errors import UserError
from isaac_ppo.io.checkpoint import torch_load

SUFFIX = ".pth"  # rl-games' save_checkpoint appends it; ours are .pt
COMPILED = "_orig_mod."  # torch.compile's wrapper, in the keys of a model rl-games compiled
LAYER = re.compile(r"a2c_network\.(actor|critic)_mlp\.(\d+)\.(weight|bias)$")
NETWORK = {"a2c_network.mu.weight": "mu.weight", "a2c_network.mu.bias": "mu.bias",
           "a2c_network.value.weight": "value.weight", "a2c_network.value.bias": "value.bias",
           "a2c_network.sigma": "log_std"}
RNN = re.compile(r"a2c_network\.(rnn|a_rnn|c_rnn)\.rnn\.((?:weight|bias)_(?:ih|hh)_l(\d+))$")
RNN_NORM = re.compile(r"a2c_network\.(layer_norm|a_layer_norm|c_layer_norm)\.(weight|bias)$")
# rl-games' recurrent modules -> ours: (the recurrence, its layer norm)
RNN_PARTS = {"rnn": ("actor_rnn", "layer_norm"), "a_rnn": ("actor_rnn", "a_layer_norm"),
             "c_rnn": ("critic_rnn", "c_layer_norm")}
RNN_KEYS = ("name", "units", "layers", "before_mlp", "layer_norm", "concat_input")
NORMALISERS = {"running_mean_std": "obs_norm", "value_mean_std": "value_norm"}
STATISTICS = {"running_mean": "mean", "running_var": "var", "count": "count"}


def is_rl_games_path(path: str) -> bool:
    return str(path).endswith(SUFFIX)


def is_rl_games(state: Any) -> bool:
    """A dict whose 'model' is a state_dict of an rl-games a2c network."""
    model = state.get("model") if isinstance(state, dict) else None
    return isinstance(model, Mapping) and any(strip(key).startswith("a2c_network.") for key in model)


def strip(key: str) -> str:
    return key.replace(COMPILED, "")


def load(path: str, device: Any = "cpu") -> Dict[str, torch.Tensor]:
    """The model state_dict of the rl-games checkpoint at path (keys without torch.compile's prefix)."""
    if not os.path.isfile(path):
        raise UserError(f"checkpoint not found: {path} (give checkpoint= an existing .pt file, or an rl-games .pth)")
    try:
        state = torch_load(path, device)
    except Exception as error:  # a truncated or foreign file
        raise UserError(f"checkpoint {path} cannot be read ({type(error).__name__}): "
                        "not an rl-games checkpoint") from None
    if not is_rl_games(state):
        raise UserError(f"checkpoint {path} is not an rl-games checkpoint (a dict whose 'model' holds a2c_network.* "
                        "tensors): .pth files are read as rl-games', ours are .pt")
    return {strip(key): value for key, value in state["model"].items()}


def network_of(rl_state: Mapping[str, torch.Tensor], path: str) -> Dict[str, Any]:
    """What the checkpoint's network is, in our terms: num_obs, num_actions, hidden, separate, normalize_input,
    normalize_value; a network our ActorCritic cannot hold is refused."""
    for key in rl_state:
        prefix, _, name = key.partition(".")
        known = (LAYER.match(key) or key in NETWORK or (prefix in NORMALISERS and name in STATISTICS)
                 or RNN.match(key) or RNN_NORM.match(key))
        if not known:
            raise UserError(f"checkpoint {path} holds {key}, which our actor-critic has no place for: only "
                            "rl-games actor_critic MLP networks with fixed_sigma (IsaacGymEnvs' continuous_a2c_logstd), "
                            "with or without an rnn block, play here")
    for key in ("a2c_network.mu.weight", "a2c_network.value.weight", "a2c_network.sigma"):
        if key not in rl_state:
            raise UserError(f"checkpoint {path} has no {key}: not an rl-games actor_critic network with fixed_sigma")
    for part in ("actor", "critic"):
        width = None  # the previous layer's outputs
        for index in layer_indices(rl_state, part):
            weight = rl_state.get(f"a2c_network.{part}_mlp.{index}.weight")
            bias = rl_state.get(f"a2c_network.{part}_mlp.{index}.bias")
            if weight is None or bias is None or weight.dim() != 2 or (width is not None and weight.shape[1] != width):
                raise UserError(f"checkpoint {path}: a2c_network.{part}_mlp.{index} is not the next Linear layer of "
                                "an MLP: only plain MLP networks (no normalisation layers, no D2RL) play here")
            width = weight.shape[0]
    actor, critic = layers(rl_state, "actor"), layers(rl_state, "critic")
    if not actor:
        raise UserError(f"checkpoint {path} has no a2c_network.actor_mlp layers: only MLP networks play here")
    hidden = [int(w.shape[0]) for w in actor]
    critic_hidden = [int(w.shape[0]) for w in critic]
    rnn = rnn_of(rl_state, hidden, int(actor[0].shape[1]), path)
    inputs = rnn.pop("inputs", None)
    num_obs = inputs if rnn["before_mlp"] else int(actor[0].shape[1])
    if critic and int(critic[0].shape[1]) != int(actor[0].shape[1]):
        raise UserError(f"checkpoint {path} has a critic over {int(critic[0].shape[1])} inputs, its actor over "
                        f"{int(actor[0].shape[1])}: a critic of other observations plays here only as rl-games' "
                        "central value, which its .pth keeps apart")
    if rl_state["a2c_network.value.weight"].shape[0] != 1:
        raise UserError(f"checkpoint {path} has {rl_state['a2c_network.value.weight'].shape[0]} values: ours is one")
    return {"num_obs": num_obs, "num_actions": int(rl_state["a2c_network.mu.weight"].shape[0]),
            "hidden": hidden, "separate": bool(critic),
            "critic_hidden": critic_hidden if critic and critic_hidden != hidden else None,
            "normalize_input": "running_mean_std.running_mean" in rl_state,
            "normalize_value": "value_mean_std.running_mean" in rl_state, "rnn": rnn}


def rnn_of(rl_state: Mapping[str, torch.Tensor], hidden: List[int], mlp_inputs: int, path: str) -> Dict[str, Any]:
    """The actor's rnn block in our terms (agent.network.rnn's keys, name None without one) and its input size
    ("inputs"), read from the shapes: 4 gates an LSTM, 3 a GRU; before the MLP when the MLP reads the rnn's units
    and the rnn does not read the MLP's output; after it, over the observation too (concat_input) when its input
    is wider than the MLP's output by the MLP's input."""
    none = {"name": None, "units": None, "layers": 1, "before_mlp": False, "layer_norm": False,
            "concat_input": False}
    module = "rnn" if "a2c_network.rnn.rnn.weight_ih_l0" in rl_state else "a_rnn"
    first = rl_state.get(f"a2c_network.{module}.rnn.weight_ih_l0")
    if first is None:
        return none
    units = int(rl_state[f"a2c_network.{module}.rnn.weight_hh_l0"].shape[1])
    gates = int(first.shape[0]) // units
    if gates not in (3, 4):
        raise UserError(f"checkpoint {path}: a2c_network.{module} has {gates} gates: an LSTM (4) or a GRU (3) "
                        "plays here")
    layer_count = len({m.group(3) for m in map(RNN.match, rl_state) if m is not None and m.group(1) == module})
    inputs = int(first.shape[1])
    after = inputs in (hidden[-1], hidden[-1] + mlp_inputs)
    before_mlp = mlp_inputs == units and not after
    norm = RNN_PARTS[module][1]
    return {"name": "lstm" if gates == 4 else "gru", "units": units, "layers": layer_count, "before_mlp": before_mlp,
            "layer_norm": f"a2c_network.{norm}.weight" in rl_state,
            "concat_input": not before_mlp and inputs == hidden[-1] + mlp_inputs, "inputs": inputs}


def layer_indices(rl_state: Mapping[str, torch.Tensor], part: str) -> List[int]:
    """The Sequential indices of the actor's (or critic's) Linear layers, in order."""
    matches = [LAYER.match(key) for key in rl_state]
    return sorted({int(m.group(2)) for m in matches if m is not None and m.group(1) == part})


def layers(rl_state: Mapping[str, torch.Tensor], part: str) -> List[torch.Tensor]:
    """The weights of the actor's (or critic's) Linear layers, in order."""
    return [rl_state[f"a2c_network.{part}_mlp.{index}.weight"] for index in layer_indices(rl_state, part)]


def network_of_model(model: Any) -> Dict[str, Any]:
    linears = [m for m in model.actor_body if isinstance(m, torch.nn.Linear)]
    hidden = [m.out_features for m in linears]
    critic = [m.out_features for m in model.critic_body if isinstance(m, torch.nn.Linear)] \
        if model.critic_body is not None else []
    recurrence = model.actor_rnn
    rnn = {"name": None, "units": None, "layers": 1, "before_mlp": False, "layer_norm": False, "concat_input": False}
    if recurrence is not None:
        rnn = {"name": "lstm" if recurrence.parts == 2 else "gru", "units": recurrence.units,
               "layers": recurrence.layers, "before_mlp": recurrence.before_mlp,
               "layer_norm": isinstance(recurrence.norm, torch.nn.LayerNorm), "concat_input": recurrence.concat_input}
    return {"num_obs": model.num_obs, "num_actions": model.mu.out_features,
            "hidden": hidden, "separate": model.critic_body is not None,
            "critic_hidden": critic if critic and critic != hidden else None,
            "normalize_input": model.obs_norm is not None, "normalize_value": model.value_norm is not None,
            "rnn": rnn}


def model_state(rl_state: Mapping[str, torch.Tensor], model: Any) -> Dict[str, torch.Tensor]:
    """Our model's state_dict with the checkpoint's tensors (the network is known to match)."""
    state: Dict[str, torch.Tensor] = {}
    for ours, part in (("actor_body", "actor"), ("critic_body", "critic")):
        body = getattr(model, ours)
        if body is None:
            continue
        indices = [i for i, m in enumerate(body) if isinstance(m, torch.nn.Linear)]
        for mine, index in zip(indices, layer_indices(rl_state, part)):
            for kind in ("weight", "bias"):
                state[f"{ours}.{mine}.{kind}"] = rl_state[f"a2c_network.{part}_mlp.{index}.{kind}"]
    for theirs_key, ours_key in NETWORK.items():
        state[ours_key] = rl_state[theirs_key]
    for key, tensor in rl_state.items():  # a recurrence and its layer norm
        rnn, norm = RNN.match(key), RNN_NORM.match(key)
        if rnn is not None:
            state[f"{RNN_PARTS[rnn.group(1)][0]}.rnn.{rnn.group(2)}"] = tensor
        elif norm is not None:
            owner = {part[1]: part[0] for part in RNN_PARTS.values()}[norm.group(1)]
            state[f"{owner}.norm.{norm.group(2)}"] = tensor
    for theirs_prefix, ours_prefix in NORMALISERS.items():
        for theirs_name, ours_name in STATISTICS.items():
            key = f"{theirs_prefix}.{theirs_name}"
            if key in rl_state:
                state[f"{ours_prefix}.{ours_name}"] = rl_state[key]
    return state


def load_model(model: Any, path: str, env: Any, task: str, device: Any = "cpu") -> None:
    """The rl-games checkpoint at path into `model` (an ActorCritic for env): weights, log-std and normalisers.
    Another task's network, or another network than the configured one, is refused in one line."""
    rl_state = load(path, device)
    theirs = network_of(rl_state, path)
    if (theirs["num_obs"], theirs["num_actions"]) != (env.num_obs, env.num_actions):
        raise UserError(f"checkpoint {path} is a policy for {theirs['num_obs']} observations and "
                        f"{theirs['num_actions']} actions, {task} has {env.num_obs} and {env.num_actions}: play it "
                        "with its own task=")
    mine = network_of_model(model)
    if theirs != mine:
        settings = {"hidden": "agent.network.hidden", "separate": "agent.network.separate",
                    "critic_hidden": "agent.network.critic_hidden",
                    "normalize_input": "agent.normalize_input", "normalize_value": "agent.normalize_value"}
        settings.update({f"rnn.{key}": f"agent.network.rnn.{key}" for key in RNN_KEYS})
        theirs, mine = flat_network(theirs), flat_network(mine)
        fixes = " ".join(f"{settings[name]}={override(theirs[name])}" for name in settings
                         if theirs[name] != mine[name])
        differences = ", ".join(f"{name} {override(theirs[name])} there, {override(mine[name])} here"
                                for name in settings if theirs[name] != mine[name])
        raise UserError(f"checkpoint {path} holds another network ({differences}): play it with {fixes}")
    state = model_state(rl_state, model)
    expected = model.state_dict()
    for name, tensor in state.items():  # (the sizes matched: what differs now is a head inconsistent with its body)
        if tuple(expected[name].shape) != tuple(tensor.shape):
            raise UserError(f"checkpoint {path}: {name} is {tuple(tensor.shape)} there, "
                            f"{tuple(expected[name].shape)} here")
    model.load_state_dict(state)


def flat_network(network: Mapping[str, Any]) -> Dict[str, Any]:
    """network_of's dict with its rnn block's keys as rnn.KEY."""
    out = {key: value for key, value in network.items() if key != "rnn"}
    out.update({f"rnn.{key}": value for key, value in network["rnn"].items()})
    return out


def override(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)
