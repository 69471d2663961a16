"""The probe: when and on what the diagnostics are measured, and the hooks that borrow what they need.

Every `diagnostics.interval_iterations` iterations (k % interval == 0) it samples `diagnostics.samples` states of the
batch just learned from, on its own random generator (the training streams are never drawn from, so a run
with diagnostics ends with the parameters of a run without them), and measures after the update, with the
normalisers the update used (they absorb the batch before it). With `diagnostics.probe_set=PATH`
(diagnostics/probe_set.py) the activations and the policy are measured on that fixed set of observations
instead, the same inputs for every run of a comparison; the ESS stays on the batch's sample (it needs the
behaviour policy's actions):
- activations of every hidden layer of the actor and of the critic (a shared trunk is measured once, as
  "trunk"), through forward hooks on the activation modules, in one extra forward pass over the sample;
- feature rank of the last hidden layer, dormant units (pooled over hidden layers), weight norms, policy
  variance, and the normalised ESS of pi_new / pi_behaviour on the sampled (state, action) pairs after the
  epochs;
- gradient kurtosis per network, the mean over the update's optimizer steps of each step's log-gradient
  kurtosis (PPO hands the gradients over just before optimizer.step(); reading them changes nothing). Not the
  first step alone: there pi / pi_behaviour = 1 everywhere, no sample is clipped, and its gradients are those
  of a plain policy gradient.
The values go to that iteration's metrics.jsonl line and TensorBoard (diagnostics/<key>) and to the scheduler.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch
from torch import nn

from isaac_ppo.agent.model import ACTIVATIONS, ActorCritic, gaussian_log_prob
from isaac_ppo.diagnostics import metrics
from isaac_ppo.errors import UserError

# the probe's sampling stream, apart from the learner's and the collector's
PROBE_SEED_OFFSET = 2_000_003


class Probe:
    def __init__(self, cfg: Mapping[str, Any], model: ActorCritic, seed: int, task: str = ""):
        self.enabled = cfg["enabled"]
        self.interval = cfg["interval_iterations"]
        self.samples = cfg["samples"]
        self.delta = cfg["delta"]
        self.tau = cfg["tau"]
        self.coverage = cfg["coverage"]
        self.grid = cfg["grid"]
        self.coverage_method = cfg["coverage_method"]
        self.variants = cfg["variants"]
        self.plot = cfg["plot"]
        self.model = model
        self.generator = torch.Generator().manual_seed(int(seed) + PROBE_SEED_OFFSET)
        self.fixed_obs: Optional[torch.Tensor] = None  # the probe set's observations, when given
        if self.enabled and cfg.get("probe_set"):
            self.fixed_obs = _fixed_observations(cfg["probe_set"], task, model)
        self._gradients: Dict[str, List[float]] = {}  # each optimizer step's kurtosis, per network
        self._armed = False

    def due(self, k: int) -> bool:
        return self.enabled and k % self.interval == 0

    # ---------------------------------------------------------------------------------------------- gradients

    def arm(self, k: int) -> Optional[Any]:
        """Before iteration k's update: the callback PPO calls at each optimizer step (None when not due)."""
        self._gradients = {}
        self._armed = self.due(k)
        return self.on_gradients if self._armed else None

    @torch.no_grad()
    def on_gradients(self, model: ActorCritic) -> None:
        """An optimizer step's gradients (unscaled under AMP): log-gradient kurtosis per network."""
        if not self._armed:
            return
        for name, params in _groups(model).items():
            grads = [p.grad.detach().reshape(-1).float().cpu() for p in params if p.grad is not None]
            if grads:
                self._gradients.setdefault(f"grad_kurtosis_{name}", []).append(metrics.grad_kurtosis(grads))

    # ---------------------------------------------------------------------------------------------- measure

    @torch.no_grad()
    def measure(self, k: int, buffer: Any) -> Dict[str, float]:
        """The diagnostics of iteration k on a sample of its batch; {} when not due."""
        if not self.due(k):
            return {}
        model = self.model
        batch = buffer.flat()
        ids, hidden = self._sample(buffer, batch["obs"].shape[0])
        obs, actions = batch["obs"][ids], batch["actions"][ids]
        mu, log_std = model.step(obs, None, hidden)[:2]
        log_ratio = gaussian_log_prob(actions, mu, log_std).double() - batch["log_probs"][ids].double()
        if self.fixed_obs is not None:  # the same inputs for every run of a comparison
            obs = self.fixed_obs.to(obs.device)
            hidden = model.initial_state(obs.shape[0], obs.device)  # (a probe set's are episode starts' states)
            mu, log_std = model.step(obs, None, hidden)[:2]
        activations = _capture(model, obs, hidden)
        self._armed = False
        out: Dict[str, float] = {key: _finite_mean(values) for key, values in self._gradients.items()}
        for network, layers in activations.items():
            suffix = "" if network in ("actor", "trunk") else f"_{network}"
            ranks = metrics.feature_rank(layers[-1], self.delta)
            out["feature_rank" + suffix] = ranks["rank"]
            out["feature_rank_fraction" + suffix] = ranks["rank_fraction"]
            if self.variants:
                out["srank" + suffix] = ranks["srank"]
                out["effective_rank" + suffix] = ranks["effective_rank"]
            if self.coverage:
                out["coverage" + suffix] = metrics.coverage(layers[-1], self.grid, self.generator,
                                                            self.coverage_method)
        named = {f"{network}.{i}": h for network, layers in activations.items() for i, h in enumerate(layers)}
        dormant = metrics.dormant_fraction(named, self.tau)
        out["dormant_fraction"] = dormant["pooled"]
        out["low_std_fraction"] = dormant["low_std_pooled"]
        out["std_ratio_min"] = dormant["std_ratio_min"]
        if self.variants:
            out.update({f"dormant_{name}": dormant[name] for name in named})
        for name, module in _networks(model).items():
            norms = metrics.weight_norm(module)
            out[f"weight_norm_{name}"] = norms["global"]
            if self.variants:
                out.update({f"weight_norm_{name}.{key}": value for key, value in norms.items() if key != "global"})
        out["ess"] = metrics.effective_sample_size(log_ratio)
        variance = metrics.policy_variance(mu, log_std[0].exp())
        out["policy_variance"] = variance["policy_variance"]
        out["mu_variance"] = variance["mu_variance"]
        return {key: float(value) for key, value in out.items() if not (isinstance(value, float) and math.isnan(value))}

    def _sample(self, buffer: Any, total: int) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """(the batch's rows the probe reads, their recurrent states or None): up to `samples` transitions at random;
        for a recurrent model, among the chunks' first steps, whose states the batch holds."""
        device = buffer.obs.device
        if buffer.hidden is None:
            return torch.randperm(total, generator=self.generator)[: min(self.samples, total)].to(device), None
        chunks, envs = buffer.hidden.shape[:2]
        firsts = (torch.arange(chunks) * buffer.seq_length).unsqueeze(1) * envs + torch.arange(envs)
        pick = torch.randperm(chunks * envs, generator=self.generator)[: min(self.samples, chunks * envs)]
        return firsts.flatten()[pick].to(device), buffer.hidden.reshape(chunks * envs, -1)[pick.to(device)]

    def write_panel(self, run_dir: str, task: str) -> None:
        """diagnostics.png (the diagnostics and the return against env steps) at the end of a run, when plotted."""
        if self.enabled and self.plot:
            from isaac_ppo.diagnostics.panel import write_panel

            panel = write_panel(run_dir)
            if panel:
                print(f"[{task}] diagnostics panel: {panel}")

    def state_dict(self) -> Dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: Optional[Mapping[str, Any]]) -> None:
        if state:
            self.generator.set_state(state["generator"])


def _capture(model: ActorCritic, obs: torch.Tensor,
             hidden: Optional[torch.Tensor] = None) -> Dict[str, List[torch.Tensor]]:
    """Post-activation outputs of every hidden layer, per network, in the order the step computes them (a
    recurrence's output, layer-normed where it is, is one of them), from one step over obs from states `hidden`
    (the actor's alone when the critic reads the env's critic observations: a probe set holds observations only)."""
    bodies = {"trunk": model.actor_body} if model.critic_body is None else {
        "actor": model.actor_body, "critic": model.critic_body}
    recurrences = {"trunk": model.actor_rnn} if model.critic_body is None else {
        "actor": model.actor_rnn, "critic": model.critic_rnn}
    if model.num_states:
        bodies, recurrences = {"actor": model.actor_body}, {"actor": model.actor_rnn}
    captured: Dict[str, List[torch.Tensor]] = {name: [] for name in bodies}
    handles = []
    activation_types = tuple(ACTIVATIONS.values())

    def keep(name: str, output: Any) -> None:
        captured[name].append((output[0] if isinstance(output, tuple) else output).detach().float())

    for name, body in bodies.items():
        layers = [layer for layer in body if isinstance(layer, activation_types)]
        if recurrences[name] is not None:
            layers.append(recurrences[name])
        for layer in layers:
            handles.append(layer.register_forward_hook(
                lambda module, inputs, output, name=name: keep(name, output)))
    try:
        if model.recurrent:
            model.step(obs, None, hidden)
        else:
            x = model.normalize_obs(obs)
            for body in bodies.values():
                body(x)
    finally:
        for handle in handles:
            handle.remove()
    return captured


def _networks(model: ActorCritic) -> Dict[str, nn.Module]:
    """Actor and critic as modules for weight norms (a shared trunk belongs to both)."""
    critic_body = model.critic_body if model.critic_body is not None else model.actor_body
    actor = {"body": model.actor_body, "mu": model.mu}
    critic = {"body": critic_body, "value": model.value}
    if model.actor_rnn is not None:  # (a recurrence belongs to its network; a shared one to both)
        actor["rnn"] = model.actor_rnn
        critic["rnn"] = model.critic_rnn if model.critic_body is not None else model.actor_rnn
        if critic["rnn"] is None:
            del critic["rnn"]
    return {"actor": nn.ModuleDict(actor), "critic": nn.ModuleDict(critic)}


def _groups(model: ActorCritic) -> Dict[str, List[nn.Parameter]]:
    """Parameter groups for gradient kurtosis: actor (body, mean head, log-std) and critic (body, value head)."""
    return {name: list(module.parameters()) + ([model.log_std] if name == "actor" else [])
            for name, module in _networks(model).items()}


def _fixed_observations(path: str, task: str, model: ActorCritic) -> torch.Tensor:
    from isaac_ppo.diagnostics import probe_set

    obs = probe_set.load(path, task)["obs"]
    num_obs = model.num_obs
    if obs.shape[1] != num_obs:
        raise UserError(f"diagnostics.probe_set={path} holds {obs.shape[1]}-dimensional observations, the env "
                        f"gives {num_obs}")
    return obs


def _finite_mean(values: List[float]) -> float:
    """The mean of the finite values (a step whose gradients were all equal has no kurtosis); nan when none."""
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan
