"""Adam for PPO on the CPU: torch.optim.Adam's update at PPO's settings, without torch.optim's wrappers.

Why: every torch.optim optimizer imports torch._dynamo on its first call (its methods are wrapped to keep
TorchDynamo out of them; torch/optim/optimizer.py), ~0.9 s of a 2-core CPU's start, 1.4-1.8 s beside other work:
a fifth of a short CLI run, paid by every training process (a newcomer's first run, the suite's hundreds). On CUDA
PPO keeps torch.optim.Adam (its multi-tensor kernels, the gradient scaler under AMP; a GPU node's start is not
two cores): `adam(...)` chooses.

The update is torch's single-tensor Adam (torch/optim/adam.py `_single_tensor_adam`, which torch.optim.Adam runs
on the CPU) with no weight decay, no amsgrad, not maximising: the same tensor operations in the same order, so the
parameters after any number of steps equal torch.optim.Adam's bit for bit on the torch this package pins
(tests/unit/test_adam.py checks it, learning rate changes between steps included). Its state_dict is
torch.optim.Adam's format, so a checkpoint written by either loads into the other (old checkpoints, a run
resumed on another device).
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List

import torch

BETAS = (0.9, 0.999)  # torch.optim.Adam's defaults, which PPO uses (rl-games, rsl_rl)
# torch.optim.Adam's param_group keys besides params, written as it writes them (so that either loads the other's)
_GROUP = {"betas": BETAS, "weight_decay": 0, "amsgrad": False, "maximize": False, "foreach": None,
          "capturable": False, "differentiable": False, "fused": None, "decoupled_weight_decay": False}


def adam(parameters: Iterable[torch.nn.Parameter], lr: float, eps: float, device: torch.device) -> Any:
    """PPO's optimizer: torch.optim.Adam on CUDA, CpuAdam elsewhere (the module's docstring)."""
    if device.type == "cuda":
        return torch.optim.Adam(parameters, lr=lr, eps=eps)
    return CpuAdam(parameters, lr=lr, eps=eps)


class CpuAdam:
    """The parts of torch.optim.Adam that PPO uses: param_groups (one; PPO sets its lr), zero_grad, step,
    state_dict, load_state_dict."""

    def __init__(self, parameters: Iterable[torch.nn.Parameter], lr: float, eps: float):
        params = list(parameters)
        if not params:
            raise ValueError("CpuAdam got an empty parameter list")
        self.param_groups: List[Dict[str, Any]] = [dict(lr=lr, eps=eps, **_GROUP, params=params)]
        self.state: Dict[torch.Tensor, Dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        if not set_to_none:
            raise ValueError("CpuAdam.zero_grad sets gradients to None only (as PPO asks)")
        for p in self.param_groups[0]["params"]:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        lr, eps = group["lr"], group["eps"]
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state.get(p)
            if state is None:  # (torch: the step count a float32 CPU tensor, the moments like the parameter)
                state = self.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                         "exp_avg_sq": torch.zeros_like(p)}
            grad, exp_avg, exp_avg_sq, step_t = p.grad, state["exp_avg"], state["exp_avg_sq"], state["step"]
            step_t += 1
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = step_t.item()
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            step_size = lr / bias_correction1
            denom = (exp_avg_sq.sqrt() / bias_correction2 ** 0.5).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)

    def state_dict(self) -> Dict[str, Any]:
        """torch.optim.Adam's layout: parameters by index, the state's tensors themselves (not copies)."""
        params = self.param_groups[0]["params"]
        index = {id(p): i for i, p in enumerate(params)}
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        group["params"] = list(range(len(params)))
        return {"state": {index[id(p)]: dict(s) for p, s in self.state.items()}, "param_groups": [group]}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """A state_dict of CpuAdam or torch.optim.Adam over the same parameters (torch's checks, its casts: the
        moments to each parameter's dtype and device, the step count kept as it is)."""
        params = self.param_groups[0]["params"]
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(params):
            raise ValueError("loaded state dict has a different number of parameter groups or parameters")
        self.state = {}
        for i, saved in state_dict["state"].items():
            p = params[groups[0]["params"].index(i)]
            self.state[p] = {k: (v if k == "step" else v.to(dtype=p.dtype, device=p.device))
                             for k, v in saved.items()}
        kept = {k: v for k, v in groups[0].items() if k != "params"}
        self.param_groups[0].update(kept, betas=tuple(kept.get("betas", BETAS)))
