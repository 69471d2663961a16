"""A probe set: a fixed sample of observations on which every run of a comparison measures rank, dormancy and
policy variance, so that two splits are measured on the same inputs (each run's own batch differs).

Made by play, from any checkpoint (states a trained policy visits are the states that matter):

  isaac-ppo-train task=Ant test=true checkpoint=runs/Ant/<date>/checkpoints/best.pt save_probe_set=ant_probe.pt

and used with ``diagnostics.probe_set=ant_probe.pt``. The observations are raw (before any normaliser): each
run sees them through its own normaliser, as it sees its own inputs.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional

import torch

from isaac_ppo.errors import UserError
from isaac_ppo.io import checkpoint

FORMAT = "isaac-ppo probe set 1"


class StateSampler:
    """Wraps a policy; keeps a uniform random sample of `samples` of the observations it acts on (reservoir
    sampling, on its own generator), so the whole play is sampled, its late states as well as its first ones."""

    def __init__(self, policy: Callable[[torch.Tensor], torch.Tensor], samples: int, seed: int):
        self.policy = policy
        self.samples = samples
        self.generator = torch.Generator().manual_seed(seed)
        self.kept: Optional[torch.Tensor] = None
        self.seen = 0

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        rows = obs.detach().float().cpu()
        if self.kept is None:
            self.kept = torch.empty(self.samples, rows.shape[1])
        filling = min(max(self.samples - self.seen, 0), rows.shape[0])
        self.kept[self.seen:self.seen + filling] = rows[:filling]
        # each later row (the i-th seen, 0-based) replaces a random slot with probability samples / (i + 1)
        index = torch.arange(self.seen + filling, self.seen + rows.shape[0], dtype=torch.float64) + 1
        slots = (torch.rand(index.shape, generator=self.generator, dtype=torch.float64) * index).long()
        for row, slot in zip(rows[filling:][slots < self.samples], slots[slots < self.samples].tolist()):
            self.kept[slot] = row
        self.seen += rows.shape[0]
        return self.policy(obs)

    def episodes_ended(self, resets: torch.Tensor) -> None:
        """(the policy it watches may carry a recurrent state: loop/evaluate.py, Acting)"""
        from isaac_ppo.agent.acting import ended

        ended(self.policy, resets)

    def sample(self) -> torch.Tensor:
        """The sample: `samples` observations, or every one seen when the play saw fewer."""
        assert self.kept is not None, "the policy never acted"
        return self.kept[: min(self.seen, self.samples)].clone()


def save(path: str, obs: torch.Tensor, task: str, source: str) -> None:
    """Write the probe set (atomically)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    torch.save({"format": FORMAT, "task": task, "obs": obs.contiguous(), "source": source}, path + ".tmp")
    os.replace(path + ".tmp", path)


def load(path: str, task: str) -> Dict[str, Any]:
    """The probe set at path, for `task`; one line naming the file when it is missing, not a probe set, or
    another task's."""
    key = "diagnostics.probe_set"
    if not os.path.isfile(path):
        raise UserError(f"{key}={path}: no such file (make one with test=true checkpoint=... save_probe_set={path})")
    try:
        state = checkpoint.torch_load(path, "cpu")
    except Exception as error:  # a truncated or foreign file: whatever torch raises, one line
        raise UserError(f"{key}={path} cannot be read ({type(error).__name__}): not a probe set") from None
    obs = state.get("obs") if isinstance(state, dict) else None
    if not isinstance(state, dict) or state.get("format") != FORMAT or not isinstance(obs, torch.Tensor) \
            or obs.dim() != 2 or obs.shape[0] == 0:
        raise UserError(f"{key}={path} is not a probe set (make one with test=true save_probe_set=PATH)")
    if state["task"] != task:
        raise UserError(f"{key}={path} holds {state['task']} observations, not {task}'s")
    if not bool(torch.isfinite(obs).all()):
        raise UserError(f"{key}={path} holds non-finite observations")
    return state
