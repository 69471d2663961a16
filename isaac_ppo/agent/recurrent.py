"""Recurrent layers with their state as one flat row per env, and a rollout cut into chunks for truncated BPTT.

A recurrent actor-critic's whole state (the actor's LSTM h and c, then the critic's when it has its own) is one
float32 tensor of shape (envs, state_size): the collector zeroes rows where an episode ended, the rollout stores
it at each chunk's start, a checkpoint saves it, and an exported policy takes it as one input and returns it as
one output. Each recurrence reads and writes its slice of that row.

Chunks follow rl-games (a2c_common.py, play_steps_rnn and the rnn dataset): the rollout of T steps is cut into
chunks of seq_length steps, the state at each chunk's start is stored, the state is zeroed inside a chunk where
an episode ended (agent.zero_rnn_on_done, rl-games' default), and PPO's minibatches are whole chunks. Where T is
not a multiple of seq_length (a scheduler's plan may choose any T) the last chunk of each env is shorter: it is
padded to seq_length with steps whose weight is zero in every loss and statistic, so no step is dropped and none
counted twice.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn

RNN_NAMES = ("lstm", "gru")


class Recurrence(nn.Module):
    """rl-games' rnn block: an LSTM or GRU of `layers` x `units` over one step, then a LayerNorm of its output when
    layer_norm; its state is state_size floats per env (h, then c for an LSTM, each layers x units). Made by
    recurrence(); one class per kind, so that TorchScript compiles each forward (export.py)."""

    PARTS = 1  # state tensors: h (and c)

    def __init__(self, rnn: nn.Module, units: int, layers: int, layer_norm: bool, before_mlp: bool,
                 concat_input: bool):
        super().__init__()
        # where it sits in its network (agent/model.py): before the MLP, or after it (and over the observation too)
        self.before_mlp, self.concat_input = before_mlp, concat_input
        self.units, self.layers, self.parts = int(units), int(layers), int(self.PARTS)
        self.state_size = self.parts * self.layers * self.units
        self.rnn = rnn
        self.norm = nn.LayerNorm(self.units) if layer_norm else nn.Identity()

    def _split(self, state: torch.Tensor) -> torch.Tensor:
        """(envs, state_size) -> (parts, layers, envs, units)"""
        return state.reshape(state.shape[0], self.parts, self.layers, self.units).permute(1, 2, 0, 3)

    def _join(self, parts: torch.Tensor) -> torch.Tensor:
        """(parts, layers, envs, units) -> (envs, state_size)"""
        return parts.permute(2, 0, 1, 3).reshape(parts.shape[2], self.state_size)


class LSTMRecurrence(Recurrence):
    PARTS = 2

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """One step: x (envs, inputs), state (envs, state_size) -> (output (envs, units), the next state)."""
        parts = self._split(state)
        out, (h, c) = self.rnn(x.unsqueeze(0), (parts[0].contiguous(), parts[1].contiguous()))
        return self.norm(out.squeeze(0)), self._join(torch.stack((h, c)))


class GRURecurrence(Recurrence):
    def forward(self, x: torch.Tensor, state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """One step: x (envs, inputs), state (envs, state_size) -> (output (envs, units), the next state)."""
        out, h = self.rnn(x.unsqueeze(0), self._split(state)[0].contiguous())
        return self.norm(out.squeeze(0)), self._join(h.unsqueeze(0))


def recurrence(name: str, inputs: int, units: int, layers: int = 1, layer_norm: bool = False,
               before_mlp: bool = False, concat_input: bool = False) -> Recurrence:
    """The recurrence rl-games' rnn block names (lstm or gru)."""
    if name not in RNN_NAMES:
        raise ValueError(f"rnn name {name!r} is not one of {RNN_NAMES}")
    kind, cls = (nn.LSTM, LSTMRecurrence) if name == "lstm" else (nn.GRU, GRURecurrence)
    return cls(kind(inputs, int(units), int(layers)), units, layers, layer_norm, before_mlp, concat_input)


def chunk_count(rollout_length: int, seq_length: int) -> int:
    """Chunks per env of a rollout: the last one shorter when seq_length does not divide the rollout."""
    return math.ceil(rollout_length / seq_length)


def episode_starts(dones: torch.Tensor, zero_on_done: bool) -> torch.Tensor:
    """(T, N) 1.0 where the state is zeroed before step t: the previous transition ended its episode (the
    state carried into a chunk's first step is the stored one, already zeroed by the collector)."""
    starts = torch.zeros_like(dones)
    if zero_on_done:
        starts[1:] = dones[:-1]
    return starts


def to_sequences(x: torch.Tensor, seq_length: int) -> torch.Tensor:
    """Time-major (T, N, ...) -> (seq_length, chunks * N, ...): column c * N + n is env n's chunk c, padded with
    zeros past T."""
    steps, envs = x.shape[:2]
    chunks = chunk_count(steps, seq_length)
    pad = chunks * seq_length - steps
    if pad:
        x = torch.cat((x, x.new_zeros((pad,) + tuple(x.shape[1:]))))
    x = x.reshape((chunks, seq_length, envs) + tuple(x.shape[2:]))
    return x.transpose(0, 1).reshape((seq_length, chunks * envs) + tuple(x.shape[3:]))


def sequence_batch(buffer: Dict[str, torch.Tensor], hidden: torch.Tensor, dones: torch.Tensor, seq_length: int,
                   zero_on_done: bool) -> Dict[str, torch.Tensor]:
    """A time-major batch as sequences for PPO: each (T, N, ...) tensor of `buffer` as (seq_length, S, ...) with
    S = chunks * N; "hidden" (S, state_size), the state at each chunk's start; "starts" (seq_length, S), where the
    state is zeroed; "valid" (seq_length, S), 0.0 on padding."""
    out = {name: to_sequences(value, seq_length) for name, value in buffer.items()}
    out["starts"] = to_sequences(episode_starts(dones, zero_on_done), seq_length)
    out["valid"] = to_sequences(torch.ones_like(dones), seq_length)
    out["hidden"] = hidden.reshape(-1, hidden.shape[-1])
    return out


def masked_mean(x: torch.Tensor, valid: Optional[torch.Tensor]) -> torch.Tensor:
    """The mean over the steps that are not padding (valid None: all are)."""
    if valid is None:
        return x.mean()
    return (x * valid).sum() / valid.sum()


def unroll(model: Any, obs: torch.Tensor, states: Optional[torch.Tensor], hidden: torch.Tensor,
           starts: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """(mu, log_std, value), each (seq_length, S, ...), of model stepped through S chunks from their starting
    states, the state zeroed before each step where starts is 1: exactly the steps the collector took."""
    mus, log_stds, values = [], [], []
    for t in range(obs.shape[0]):
        hidden = hidden * (1.0 - starts[t]).unsqueeze(-1)
        mu, log_std, value, hidden = model.step(obs[t], None if states is None else states[t], hidden)
        mus.append(mu)
        log_stds.append(log_std)
        values.append(value)
    value = None if values[0] is None else torch.stack(values)
    return torch.stack(mus), torch.stack(log_stds), value
