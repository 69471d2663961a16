"""Running mean and variance (float64, Chan's parallel update), used for observations and value targets."""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch


class RunningMeanStd(torch.nn.Module):
    def __init__(self, shape: tuple = (), epsilon: float = 1e-5, clip: float = 5.0):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))
        self.epsilon = epsilon
        self.clip = clip

    @torch.no_grad()
    def update(self, x: torch.Tensor, merge: Optional[Callable[..., Any]] = None) -> None:
        """Fold a batch (rows are samples) into the running statistics. `merge(count, mean, var)` turns this
        process's batch moments into those of all ranks' batches (distributed.Local.merge_moments)."""
        x = x.reshape(-1, *self.mean.shape).to(torch.float64)
        batch_mean = x.mean(dim=0)
        batch_var = x.var(dim=0, unbiased=False)
        batch_count = x.shape[0]
        if merge is not None:
            batch_count, batch_mean, batch_var = merge(batch_count, batch_mean, batch_var)
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean += delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta.pow(2) * self.count * batch_count / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        std = torch.sqrt(self.var + self.epsilon).to(x.dtype)
        return ((x - self.mean.to(x.dtype)) / std).clamp(-self.clip, self.clip)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        std = torch.sqrt(self.var + self.epsilon).to(x.dtype)
        return x * std + self.mean.to(x.dtype)

    def extra_repr(self) -> str:
        return f"shape={tuple(self.mean.shape)}, clip={self.clip}"
