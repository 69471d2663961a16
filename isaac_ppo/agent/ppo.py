"""The PPO update: clipped surrogate, clipped value loss, entropy and bounds terms, learning-rate schedules.

Follows rl-games' continuous PPO as IsaacGymEnvs configures it, with these choices:
- observation and value normalisers are frozen during a rollout and absorb its batch before the update (the
  runner calls absorb_batch_statistics first), so the policy and critic the update trains are the ones that act
  and bootstrap in the next rollout; the normalisers' shift is part of the step that the clip and the KL see (both
  are against the behaviour policy), and the first minibatch's ratio is not exactly 1 (rl-games: the observation
  normaliser moves during the first epoch, the value normaliser before the update). Absorbed after the update
  instead, every rollout ran a policy shifted by normalisers it was never trained under: on BallBalance (8 epochs)
  that held isaac-ppo 150-250 below rl-games (benchmarks/history/ballbalance.md). `agent.normalizer_update`
  chooses (before_update, the default; after_update, the order before and rsl_rl's): benchmarks/RESULTS.md
  "Normaliser order";
- a fresh minibatch permutation every epoch (rsl_rl reuses one);
- the adaptive learning rate as rl-games': above 2x the threshold lr /= 1.5, below half lr *= 1.5, within
  [1e-6, 1e-2], after every minibatch from its KL (`agent.schedule_type=legacy`) or after every epoch from the mean
  KL of its minibatches (`standard`, as IsaacGymEnvs' hand and manipulation configs set it);
- mixed precision (float16 autocast and a gradient scaler) on CUDA only, as rl-games.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple

import torch

from isaac_ppo.agent.adam import adam
from isaac_ppo.agent.model import ActorCritic, gaussian_entropy, gaussian_kl, gaussian_log_prob
from isaac_ppo.distributed import Local
from isaac_ppo.agent.recurrent import masked_mean, unroll
from isaac_ppo.agent.rollout import RolloutBuffer
from isaac_ppo.agent.stale import corrected as stale_batch, delayed_update, stale_weights, weight_of
from isaac_ppo.errors import UserError
from isaac_ppo.io.checkpoint import first_non_finite
from isaac_ppo.scheduler.plan import Plan

LR_MIN, LR_MAX = 1e-6, 1e-2


class NonFiniteLoss(UserError):
    """A loss became NaN or infinite; parameters were not touched by it."""


class PPO:
    def __init__(self, model: ActorCritic, cfg: Mapping[str, Any], device: torch.device, generator: torch.Generator,
                 comm: Optional[Local] = None):
        self.model = model
        self.comm = comm if comm is not None else Local()  # the other ranks' gradients, advantages and KL
        self.cfg = dict(cfg)  # the agent's values as a plain dict: no config lookups per minibatch
        self.device = device
        self.generator = generator
        self.lr = cfg["learning_rate"]
        self.optimizer = adam(model.parameters(), lr=self.lr, eps=1e-8, device=device)  # (torch's, or its update
        # without torch.optim on the CPU: agent/adam.py)
        self.amp = cfg["mixed_precision"] and device.type == "cuda"
        self.scaler = _cuda_grad_scaler(self.amp) if device.type == "cuda" else None
        # called with the model at every optimizer step, gradients unscaled and not yet clipped (diagnostics
        # read them; nothing is changed)
        self.grad_observer: Optional[Callable[[ActorCritic], None]] = None

    def set_lr(self, lr: float) -> None:
        self.lr = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def schedule_lr(self, progress: float) -> None:
        """Per-iteration schedules (linear, over the run's progress in [0, 1]: iterations or env steps,
        whichever budget is nearer its end); the adaptive one acts inside update(), per minibatch or per epoch."""
        if self.cfg["lr_schedule"] == "linear":
            self.set_lr(self.cfg["learning_rate"] * max(1.0 - progress, 0.0))

    def update(self, buffer: RolloutBuffer, plan: Plan, stale: bool = False,
               behaviour: Optional[Mapping[str, torch.Tensor]] = None) -> Dict[str, float]:
        """PPO epochs over the batch; `stale`: the batch was collected by an older policy than the one this
        update starts from (concurrent collection, one update behind).

        A stale batch has two reference policies: the behaviour policy that acted (its log-probs are stored)
        and the policy at the start of this update (the proximal one). `agent.stale_clip` chooses what the
        surrogate clips around: `behaviour` (HTS-RL's ratio pi / pi_behaviour, clipped: centred on the policy
        that acted, it let Ant's updates run away, issue 90) or `proximal` (the default: the surrogate of
        pi / pi_prox clipped, times `agent.stale_weight`'s importance weight pi_prox / pi_behaviour: whole as in
        decoupled PPO, Hilton et al. 2022, whose unclipped value is the pi / pi_behaviour ratio times the
        advantage; truncated at 1; or none, as APPO, the advantages then V-trace's; auto, the default: none under
        V-trace, whole without it: agent/stale.py).
        Either way the KL (logged, and steering the adaptive learning rate) is this update's own step from
        the proximal policy: measured against the behaviour policy it would count the staleness as step size.
        With a fresh batch both references are the behaviour policy and both forms are plain PPO.

        A stale batch's advantages may be corrected for the lag (`agent.stale_correction=vtrace`), or the update
        computed at the behaviour parameters (given in `behaviour`) and its step applied to the current ones
        (`agent.stale_update=delayed`, HTS-RL's delayed gradient): agent/stale.py. A feed-forward stale batch's row
        also says how far the policy had moved from the one that acted (stale_kl, stale_clip_fraction)."""
        cfg, model = self.cfg, self.model
        batch = buffer.flat()
        lag: Dict[str, float] = {}
        if stale and not model.recurrent:
            batch, lag = stale_batch(model, buffer, batch, cfg, plan.minibatch_size)
        if stale and cfg["stale_update"] == "delayed":
            if behaviour is None:
                raise RuntimeError("agent.stale_update=delayed needs the behaviour policy's parameters of a stale batch")
            return dict(delayed_update(model, behaviour, lambda: self.update(buffer, plan)), **lag)
        raw_advantages = batch["advantages"]
        advantages = raw_advantages
        if cfg["normalize_advantage"]:
            advantages = self.comm.standardize(advantages)
        data = {"obs": batch["obs"], "actions": batch["actions"], "log_probs": batch["log_probs"],
                "mu": batch["mu"], "advantages": advantages, "old_values": model.normalize_value(batch["values"]),
                "returns": model.normalize_value(batch["returns"])}
        if "states" in batch:  # the critic's own observations (asymmetric envs)
            data["states"] = batch["states"]
        # the minibatches' rows: transitions, or (recurrent) whole chunks of seq_length steps, as many minibatches
        # an epoch as the plan's minibatch_size makes of the batch (agent/recurrent.py)
        if model.recurrent:
            data = buffer.sequences(data)
            rows, split = data["hidden"].shape[0], -(-plan.batch_size // plan.minibatch_size)
        else:
            rows, split = plan.batch_size, None
        start_log_std = buffer.log_std
        if stale:
            with torch.no_grad():
                # (a feed-forward batch's means came with stale_batch's forward pass; a recurrent one unrolls here)
                start_mu = self._start_means(data, rows, split) if model.recurrent else batch["start_mu"]
                start_log_std = model.log_std.detach().clone()
                if cfg["stale_clip"] == "proximal":
                    behaviour_log_probs = data["log_probs"]
                    data["log_probs"] = gaussian_log_prob(data["actions"], start_mu, start_log_std)
                    weight = weight_of(cfg, model.recurrent)
                    if weight != "none":  # (none: the minibatch loop's unweighted surrogate, no ones to multiply)
                        data["weights"] = stale_weights(data["log_probs"] - behaviour_log_probs, weight)
            data["mu"] = start_mu
        # else the behaviour policy is the policy at the start of this update
        clip = cfg["clip"]
        # the KL's reference: the update's start, or (previous_epoch, rl-games') each row's means and log-std as this
        # update last computed them, an epoch before (rl-games' update_mu_sigma: its minibatches are fixed slices,
        # ours reshuffled, so the reference is kept per row)
        since_epoch = cfg.get("kl_reference", "update_start") == "previous_epoch"
        if since_epoch:
            ref_mu = data["mu"].float().clone()
            ref_log_std = start_log_std.float().expand_as(ref_mu).clone()
        sums = torch.zeros(7, device=self.device)  # actor, critic, entropy, bounds, kl, clip fraction, count
        adaptive = cfg["lr_schedule"] == "adaptive"
        per_epoch = cfg.get("schedule_type", "legacy") == "standard"
        for _ in range(plan.epochs):
            epoch_kls = []
            for ids, mb in self._minibatches(data, rows, plan.minibatch_size, split):
                valid = mb.get("valid")  # (recurrent: 0.0 on a chunk's padding; None: every row counts)
                with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=self.amp):
                    mu, log_std, value = self._forward(mb)
                    log_prob = gaussian_log_prob(mb["actions"], mu, log_std)
                    ratio = torch.exp(log_prob - mb["log_probs"])
                    adv = mb["advantages"]
                    surrogate = torch.max(-adv * ratio, -adv * ratio.clamp(1.0 - clip, 1.0 + clip))
                    actor_loss = masked_mean(surrogate if "weights" not in mb else mb["weights"] * surrogate, valid)
                    target, old = mb["returns"], mb["old_values"]
                    if cfg["clip_value"]:
                        clipped = old + (value - old).clamp(-clip, clip)
                        critic_loss = masked_mean(torch.max((value - target).pow(2), (clipped - target).pow(2)),
                                                  valid)
                    else:
                        critic_loss = masked_mean((value - target).pow(2), valid)
                    entropy = masked_mean(gaussian_entropy(log_std), valid)
                    bounds = bounds_loss(mu, valid)
                    loss = (
                        actor_loss + 0.5 * cfg["critic_coef"] * critic_loss
                        - cfg["entropy_coef"] * entropy + cfg["bounds_loss_coef"] * bounds
                    )
                with torch.no_grad():
                    new_mu, new_log_std = mu.float(), log_std.float()
                    if since_epoch:
                        kl = masked_mean(gaussian_kl(rows_of(ref_mu, ids, split), rows_of(ref_log_std, ids, split),
                                                     new_mu, new_log_std), valid)
                        put_rows(ref_mu, ids, split, new_mu)
                        put_rows(ref_log_std, ids, split, new_log_std.expand_as(new_mu))
                    else:
                        kl = masked_mean(gaussian_kl(mb["mu"], start_log_std, new_mu, new_log_std), valid)
                    clipped_fraction = masked_mean(((ratio - 1.0).abs() > clip).float(), valid)
                # the minibatch's KL and loss ride with the gradients: averaged over ranks in the same all-reduce
                mean_kl, mean_loss = self._step(loss, torch.stack([kl, loss.detach().float()]))
                if not bool(torch.isfinite(mean_loss)):
                    raise NonFiniteLoss(self._non_finite_loss_message(actor_loss, critic_loss))
                self._apply_step()
                with torch.no_grad():
                    sums += torch.stack([
                        actor_loss.detach().float(), critic_loss.detach().float(), entropy.detach().float(),
                        bounds.detach().float(), kl, clipped_fraction, torch.ones((), device=self.device),
                    ])
                if adaptive and per_epoch:
                    epoch_kls.append(mean_kl)  # (no host sync per minibatch)
                elif adaptive:
                    self._adapt_lr(float(mean_kl))
            if adaptive and per_epoch and epoch_kls:  # (rl-games' standard: the epoch's minibatches' mean KL)
                self._adapt_lr(float(torch.stack(epoch_kls).mean()))
        actor, critic, entropy, bounds, kl, clip_frac, count = (sums[:6] / sums[6]).tolist() + [float(sums[6])]
        return dict({
            "actor_loss": actor, "critic_loss": critic, "entropy": entropy, "bounds_loss": bounds, "kl": kl,
            "clip_fraction": clip_frac, "lr": self.lr, "minibatches": int(count),
            "advantage_std": float(raw_advantages.std()),  # before standardising: the signal the update sees
        }, **lag)

    def _minibatches(self, data: Dict[str, torch.Tensor], rows: int, size: int,
                     split: Optional[int]) -> Iterator[Tuple[torch.Tensor, Dict[str, torch.Tensor]]]:
        """One epoch's minibatches of data in a fresh random order: `size` transitions each (feed-forward), or
        (recurrent: split not None) the chunks in `split` near-equal groups, indexed on their second axis."""
        order = self.permutation(rows)
        if split is None:
            for ids in order.split(size):
                yield ids, {name: value[ids] for name, value in data.items()}
        else:
            for ids in order.tensor_split(min(split, rows)):  # (a later plan asking more: one chunk a minibatch)
                yield ids, {name: value[ids] if name == "hidden" else value[:, ids] for name, value in data.items()}

    def _forward(self, mb: Dict[str, torch.Tensor]) -> Any:
        """(mu, log_std, value) of a minibatch: per transition, or unrolled over its chunks from their stored
        states (zeroed where an episode began inside a chunk)."""
        if "hidden" in mb:
            return unroll(self.model, mb["obs"], mb.get("states"), mb["hidden"], mb["starts"])
        return self.model(mb["obs"]) if "states" not in mb else self.model(mb["obs"], mb["states"])

    def _start_means(self, data: Dict[str, torch.Tensor], rows: int, split: int) -> torch.Tensor:
        """A recurrent policy's means at the start of this update over the whole batch of chunks, in data's layout
        (stale batches; a feed-forward batch's come from agent/stale.py's start_policy)."""
        model = self.model
        ids = torch.arange(rows, device=self.device)
        parts = [unroll(model, data["obs"][:, part], None, data["hidden"][part], data["starts"][:, part])[0].float()
                 for part in ids.tensor_split(split)]
        return torch.cat(parts, dim=1)

    def _non_finite_loss_message(self, actor_loss: torch.Tensor, critic_loss: torch.Tensor) -> str:
        """What made the loss non-finite: a previous step that left a parameter non-finite (a finite loss with a
        huge step), else the batch."""
        losses = "actor {:.3g}, critic {:.3g}".format(float(actor_loss.detach()), float(critic_loss.detach()))
        bad = first_non_finite(dict(self.model.named_parameters()))
        if bad is not None:
            return (f"non-finite parameter {bad} after an optimizer step (then a non-finite loss: {losses}): "
                    "training stopped; the checkpoints on disk are the last good ones (a smaller agent.learning_rate?)")
        return f"non-finite loss ({losses}): training stopped before the step"

    @torch.no_grad()
    def absorb_batch_statistics(self, buffer: RolloutBuffer, when: str = "before_update") -> None:
        """Fold the batch into the normalisers (the value normaliser takes the returns) when `when` (before_update
        or after_update, the runner's two calls) is agent.normalizer_update."""
        if self.cfg.get("normalizer_update", "before_update") != when:
            return
        merge = self.comm.merge_moments  # every rank's batch, exactly
        if self.model.obs_norm is not None:
            self.model.obs_norm.update(buffer.obs.view(-1, buffer.obs.shape[-1]), merge)
        if self.model.state_norm is not None:
            self.model.state_norm.update(buffer.states.view(-1, buffer.states.shape[-1]), merge)
        if self.model.value_norm is not None:
            self.model.value_norm.update(buffer.returns.view(-1, 1), merge)

    def permutation(self, n: int) -> torch.Tensor:
        """The order in which an epoch visits the batch (a fresh one every epoch)."""
        return torch.randperm(n, generator=self.generator, device=self.device)

    def _step(self, loss: torch.Tensor, riders: torch.Tensor) -> torch.Tensor:
        """Backward, and the gradients averaged over ranks (still scaled under AMP, as rl-games does, so that every
        rank's scaler sees the same infs); returns the riders averaged with them. The step is _apply_step."""
        self.optimizer.zero_grad(set_to_none=True)
        (self.scaler.scale(loss) if self.amp else loss).backward()
        return self.comm.average_gradients(self.model.parameters(), riders)

    def _apply_step(self) -> None:
        if self.amp:
            self.scaler.unscale_(self.optimizer)
        if self.grad_observer is not None:
            self.grad_observer(self.model)
        if self.cfg["truncate_grads"]:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg["grad_norm"])
        if self.amp:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    def _adapt_lr(self, kl: float) -> None:
        threshold = self.cfg["kl_threshold"]
        if kl > 2.0 * threshold:
            self.set_lr(max(self.lr / 1.5, LR_MIN))
        elif kl < 0.5 * threshold:
            self.set_lr(min(self.lr * 1.5, LR_MAX))

    def state_dict(self) -> Dict[str, Any]:
        state = {"optimizer": self.optimizer.state_dict(), "lr": self.lr}
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.set_lr(float(state["lr"]))
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])


def rows_of(values: torch.Tensor, ids: torch.Tensor, split: Optional[int]) -> torch.Tensor:
    """A minibatch's rows of a per-row tensor: transitions on the first axis, or (recurrent: split not None) chunks
    on the second (_minibatches' layout)."""
    return values[ids] if split is None else values[:, ids]


def put_rows(values: torch.Tensor, ids: torch.Tensor, split: Optional[int], rows: torch.Tensor) -> None:
    """Write a minibatch's rows back into a per-row tensor (rows_of's inverse)."""
    if split is None:
        values[ids] = rows
    else:
        values[:, ids] = rows


def _cuda_grad_scaler(enabled: bool) -> Any:
    """torch.amp.GradScaler("cuda") where torch has it (2.3+; torch.cuda.amp's is deprecated there), else the old."""
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)  # torch < 2.3: the Isaac Gym image's 1.10


def bounds_loss(mu: torch.Tensor, valid: Optional[torch.Tensor] = None, soft_bound: float = 1.1) -> torch.Tensor:
    """Squared penalty on action means outside +-soft_bound (rl-games' bounds loss); valid: masked_mean's."""
    high = (mu - soft_bound).clamp(min=0.0).pow(2)
    low = (mu + soft_bound).clamp(max=0.0).pow(2)
    return masked_mean((high + low).sum(dim=-1), valid)
