"""Learning from a batch one update stale (concurrent collection, HTS-RL): what PPO's update does besides clipping
against the behaviour policy (`agent.stale_clip`, agent/ppo.py).

- `agent.stale_correction=vtrace` (or `auto`, the default, for a feed-forward network) corrects the advantages and value targets for the lag with V-trace's truncated
  importance weights (Espeholt et al. 2018, as APPO does): rho_t = min(1, pi(a_t|s_t) / mu(a_t|s_t)), with pi the
  policy at the update's start and mu the behaviour policy that acted, traces c_t = lambda * min(1, same ratio), and
  the values of the update-start critic. The advantage is v_t - V(s_t), whose recursion is
  rho_t delta_t + gamma c_t (v_{t+1} - V(s_{t+1})): with every ratio 1 it is GAE(lambda) exactly, and the value target
  v_t the lambda-return. The bootstrap past the rollout's end and the time-out bootstraps folded into the rewards stay
  the behaviour critic's (they were computed when the batch was collected). With the proximal clip
  (`agent.stale_clip=proximal`, the default) and no importance weight beside it (`agent.stale_weight=none`, what
  `auto` gives under V-trace: APPO's surrogate) it was the best of six updates on Ant, ahead of synchronous, and
  faster than synchronous to 400 on Cartpole (benchmarks/history/schedulers.md, issue 90); the clip against the
  behaviour policy alone stood still, and the proximal clip's whole importance weight slowed both.
- `agent.stale_update=delayed` is HTS-RL's delayed gradient: the update is computed at the behaviour policy's
  parameters, for which the batch is on-policy (plain PPO, ratios against the policy that acted), and its step is
  added to the current parameters: theta_{k+1} = theta_k + (PPO(theta_{k-1}, batch) - theta_{k-1}). Adam's moments
  and the adaptive learning rate run on as in any update; the normalisers are the current ones.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Tuple

import torch

from isaac_ppo.agent.model import ActorCritic, gaussian_kl, gaussian_log_prob
from isaac_ppo.agent.rollout import RolloutBuffer

RHO_BAR, C_BAR = 1.0, 1.0  # V-trace's truncation levels (IMPALA's defaults)


def vtrace(rewards: torch.Tensor, dones: torch.Tensor, values: torch.Tensor, last_values: torch.Tensor,
           log_ratio: torch.Tensor, gamma: float, lam: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """(advantages, value targets), time-major (T, N), from rewards, dones and values (T, N), the bootstrap
    last_values (N,) and log(pi / mu) of each taken action (T, N)."""
    ratio = torch.exp(log_ratio)
    rho, c = ratio.clamp(max=RHO_BAR), lam * ratio.clamp(max=C_BAR)
    advantages = torch.zeros_like(values)
    ahead = torch.zeros_like(last_values)  # v_{t+1} - V(s_{t+1})
    next_values = last_values
    for t in reversed(range(values.shape[0])):
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_values * not_done - values[t]
        ahead = rho[t] * delta + gamma * c[t] * not_done * ahead
        advantages[t] = ahead
        next_values = values[t]
    return advantages, advantages + values


@torch.no_grad()
def start_policy(model: ActorCritic, batch: Mapping[str, torch.Tensor], size: int) -> Dict[str, torch.Tensor]:
    """The policy at the update's start over a feed-forward batch: its means and values (denormalised)."""
    mus, values = [], []
    for ids in torch.arange(batch["obs"].shape[0], device=batch["obs"].device).split(size):
        mu, _, value = model(batch["obs"][ids]) if "states" not in batch else model(batch["obs"][ids],
                                                                                     batch["states"][ids])
        mus.append(mu.float())
        values.append(model.denormalize_value(value.float()))
    return {"mu": torch.cat(mus), "values": torch.cat(values)}


def lag(behaviour_mu: torch.Tensor, behaviour_log_std: torch.Tensor, start_mu: torch.Tensor,
        start_log_std: torch.Tensor, log_ratio: torch.Tensor, clip: float) -> Dict[str, float]:
    """How far the update-start policy already is from the one that acted: the mean KL(mu || pi) and the share of
    the batch whose ratio pi / mu lies outside PPO's clip before the update has taken a step."""
    kl = gaussian_kl(behaviour_mu, behaviour_log_std, start_mu, start_log_std).mean()
    outside = ((torch.exp(log_ratio) - 1.0).abs() > clip).float().mean()
    return {"stale_kl": float(kl), "stale_clip_fraction": float(outside)}


def vtrace_on(cfg: Mapping[str, Any], recurrent: bool) -> bool:
    """Whether a stale batch's advantages get V-trace's correction: agent.stale_correction, with auto meaning yes
    for a feed-forward network updated at the current parameters (the measured default: issue 90)."""
    if cfg["stale_correction"] == "auto":
        return not recurrent and cfg["stale_update"] != "delayed"
    return cfg["stale_correction"] == "vtrace"


@torch.no_grad()
def corrected(model: ActorCritic, buffer: RolloutBuffer, batch: Dict[str, torch.Tensor], cfg: Mapping[str, Any],
              size: int) -> Tuple[Dict[str, torch.Tensor], Dict[str, float]]:
    """The batch with V-trace's advantages, value targets and the update-start values (vtrace), or as it is; and the
    lag's size either way."""
    start = start_policy(model, batch, size)
    log_std = model.log_std.detach().float()
    log_ratio = gaussian_log_prob(batch["actions"], start["mu"], log_std) - batch["log_probs"]
    measured = lag(batch["mu"], buffer.log_std, start["mu"], log_std, log_ratio, cfg["clip"])
    batch = dict(batch, start_mu=start["mu"])  # (the update's stale clip reads it: one forward, not two)
    if not vtrace_on(cfg, recurrent=False):
        return batch, measured
    shape = (buffer.rollout_length, buffer.num_envs)
    advantages, returns = vtrace(buffer.rewards, buffer.dones, start["values"].view(shape), buffer.last_values,
                                 log_ratio.view(shape), cfg["gamma"], cfg["lam"])
    return dict(batch, advantages=advantages.view(-1), returns=returns.view(-1), values=start["values"]), measured


def weight_of(cfg: Mapping[str, Any], recurrent: bool) -> str:
    """The proximal clip's weight for a stale batch (agent.stale_weight), `auto` resolved: none (APPO's surrogate)
    where V-trace corrects the advantages, the best on Ant and Cartpole (issue 90), and the whole importance
    weight where nothing else answers the lag (a recurrent network: no V-trace here)."""
    if cfg["stale_weight"] == "auto":
        return "none" if vtrace_on(cfg, recurrent) else "importance"
    return cfg["stale_weight"]


def stale_weights(log_ratio: torch.Tensor, weight: str) -> torch.Tensor:
    """The proximal clip's importance weight for each transition (agent.stale_weight), from log(pi_start / mu):
    `importance` the ratio itself (decoupled PPO: the surrogate's unclipped value is then pi / mu times the
    advantage), `truncated` min(1, ratio) (V-trace's rho-bar: no sample counts more than once), `none` 1 (APPO's
    surrogate, the ratio pi / pi_start clipped with nothing beside it: the lag answered by V-trace's advantages)."""
    if weight == "none":
        return torch.ones_like(log_ratio)
    ratio = torch.exp(log_ratio)
    return ratio.clamp(max=RHO_BAR) if weight == "truncated" else ratio


def delayed_update(model: ActorCritic, behaviour: Mapping[str, torch.Tensor],
                   update: Callable[[], Dict[str, float]]) -> Dict[str, float]:
    """Run update (plain PPO on the batch) from the behaviour parameters and add its step to the current ones."""
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        current = {name: value.detach().clone() for name, value in parameters.items()}
        for name, value in parameters.items():
            value.copy_(behaviour[name])
    stats = update()
    with torch.no_grad():
        for name, value in parameters.items():  # theta_b' + (theta_now - theta_b) = theta_now + the step
            value.add_(current[name] - behaviour[name])
    return stats
