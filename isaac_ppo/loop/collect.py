"""Executes a Plan: steps the active envs for rollout_length steps with a policy.

SyncCollector collects a batch when asked; BackgroundCollection runs it on a thread with a snapshot of the
policy (HTS-RL), so batch k+1 is collected while the learner updates on batch k. Observations are checked
for non-finite values once per batch (one host sync), not per step.

A recurrent model's state (agent/recurrent.py) is the collector's too: a row per env of the pool (an env left out
of a smaller active set keeps its own, as it keeps its physics), zeroed where an episode ended, stored in the
batch at each chunk's start, and saved in checkpoints. A time-out's bootstrap value is the critic's on the final
observation stepped from the state that reached it (the state before it is zeroed).
"""
from __future__ import annotations

import copy
import dataclasses
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import torch

from isaac_ppo.agent.model import ActorCritic, gaussian_log_prob
from isaac_ppo.agent.rollout import RolloutBuffer
from isaac_ppo.envs.contract import nonfinite_rows, num_states, supports_active
from isaac_ppo.envs.episodes import EpisodeTracker
from isaac_ppo.errors import NonFiniteError, UserError
from isaac_ppo.scheduler.plan import Plan


class SyncCollector:
    """Steps the env with a policy; owns the env's current observations, the episode bookkeeping and the
    noise generator of the actions (its own stream, apart from the learner's)."""

    def __init__(self, env: Any, model: ActorCritic, gamma: float, reward_scale: float, generator: torch.Generator,
                 window: int = 100, seq_length: int = 1):
        self.env = env
        self.model = model
        self.gamma = gamma
        self.reward_scale = reward_scale
        self.generator = generator
        self.device = torch.device(env.device)
        self.tracker = EpisodeTracker(env.num_envs, self.device, window)
        self.buffers: List[Optional[RolloutBuffer]] = [None, None]  # two: one is learned from, one filled
        self.obs: Optional[torch.Tensor] = None  # the active envs' current observations
        self.num_states = num_states(env)
        self.states: Optional[torch.Tensor] = None  # ... and their critic observations (asymmetric envs only)
        self.seq_length = seq_length  # (recurrent: the chunks whose starting states a batch stores)
        # a recurrent model's state, a row per env of the pool (None: feed-forward)
        self.hidden: Optional[torch.Tensor] = model.initial_state(env.num_envs, self.device)

    def reset(self) -> None:
        self._observed(self.env.reset())
        if self.hidden is not None:
            self.hidden.zero_()

    def restore_observations(self, obs: torch.Tensor, states: Optional[torch.Tensor],
                             hidden: Optional[torch.Tensor] = None) -> None:
        """The current observations (and critic observations, and recurrent states) a checkpoint saved, onto this
        collector's device."""
        self.obs = obs.to(self.device)
        self.states = states.to(self.device) if states is not None else None
        if hidden is not None:
            self.hidden = hidden.to(self.device)

    def _observed(self, obs_dict: Dict[str, torch.Tensor]) -> None:
        self.obs = obs_dict["obs"]
        self.states = obs_dict["states"] if self.num_states else None

    @torch.no_grad()
    def collect(self, plan: Plan, model: Optional[ActorCritic] = None, slot: int = 0) -> Tuple[RolloutBuffer, Dict[str, Any]]:
        """One batch of plan with model (default: the live one) into buffer `slot`; info carries the
        bootstrap values, divergences and the episodes that ended in the batch."""
        env, model = self.env, (model if model is not None else self.model)
        started = time.perf_counter()
        if self.obs is None:
            self.reset()
        if self.obs.shape[0] != plan.num_envs:
            if not supports_active(env):
                raise UserError(f"this env cannot change its active envs (num_envs={plan.num_envs})")
            self._observed(env.set_active(plan.num_envs))
        buf = self.buffers[slot]
        if buf is None or not buf.fits(plan.rollout_length, plan.num_envs):
            buf = RolloutBuffer(plan.rollout_length, plan.num_envs, env.num_obs, env.num_actions, self.device,
                                self.num_states, model.state_size, self.seq_length, model.zero_on_done)
            self.buffers[slot] = buf
        diverged = 0
        buf.log_std.copy_(model.log_std.detach())
        obs, states = self.obs, self.states
        n = plan.num_envs
        hidden = self.hidden[:n] if self.hidden is not None else None
        task_state: Optional[Dict[str, torch.Tensor]] = None  # (the last step's: the task's own state, e.g. a level)
        # time-outs whose bootstrap value is the next step's own critic value (an env without final_obs, as
        # Isaac Gym's: the observation returned with the reset flag is the terminal one)
        deferred: Optional[torch.Tensor] = None
        for t in range(plan.rollout_length):
            if hidden is not None and t % self.seq_length == 0:
                buf.hidden[t // self.seq_length] = hidden
            mu, log_std, value, next_hidden = model.step(obs, states, hidden)
            noise = torch.randn(mu.shape, generator=self.generator, device=mu.device, dtype=mu.dtype)
            actions = mu + log_std.exp() * noise
            buf.obs[t] = obs
            if states is not None:
                buf.states[t] = states
            buf.actions[t] = actions
            buf.mu[t] = mu
            buf.log_probs[t] = gaussian_log_prob(actions, mu, log_std)
            buf.values[t] = model.denormalize_value(value)
            if deferred is not None:
                buf.rewards[t - 1] += self.gamma * buf.values[t] * deferred
            obs_dict, rewards, resets, extras = env.step(actions)
            self.tracker.update(rewards, resets, extras.get("diverged_envs"), extras.get("reward_terms"))
            time_outs = extras["time_outs"]
            final_obs, final_states = extras.get("final_obs"), extras.get("final_states")
            if final_obs is None and hidden is not None:  # (the terminal observation is the one returned: its
                final_obs = obs_dict["obs"]  # value needs this step's state)
                final_states = obs_dict["states"] if self.num_states else None
            if final_obs is not None:
                # a truncated episode would have gone on: bootstrap its value from the observation that ended it
                bootstrap = self.gamma * self._time_out_values(model, final_obs, time_outs, final_states, next_hidden)
                buf.rewards[t] = rewards * self.reward_scale + bootstrap
            else:  # ... which is the next observation: its value comes with the next step's forward pass
                buf.rewards[t] = rewards * self.reward_scale
                deferred = time_outs.to(buf.rewards.dtype)
            buf.dones[t] = resets.to(buf.dones.dtype)
            if hidden is not None:
                hidden = next_hidden * (1.0 - buf.dones[t]).unsqueeze(-1) if model.zero_on_done else next_hidden
            diverged += extras.get("diverged", 0)
            task_state = extras.get("task_state", task_state)
            obs = obs_dict["obs"]
            states = obs_dict["states"] if states is not None else None
        self.obs, self.states = obs, states
        if hidden is not None:
            self.hidden[:n] = hidden
        last_values = model.denormalize_value(model.step(obs, states, hidden)[2])
        if deferred is not None:
            buf.rewards[-1] += self.gamma * last_values * deferred
        self._check_finite(buf, obs, states)
        info = {"last_values": last_values, "diverged": diverged, "collect_s": time.perf_counter() - started}
        info.update(self.tracker.statistics())
        if task_state:
            info["task_state"] = {name: float(value) for name, value in task_state.items()}
        return buf, info

    def _time_out_values(self, model: ActorCritic, final_obs: torch.Tensor, time_outs: torch.Tensor,
                         final_states: Optional[torch.Tensor] = None,
                         hidden: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The critic's values of the final observations of the envs that timed out (0 elsewhere); hidden: the
        recurrent state that reached them."""
        values = torch.zeros(time_outs.shape, device=final_obs.device)
        if final_obs.device.type == "cpu":
            ids = time_outs.nonzero().flatten()  # usually none: evaluate the critic on those rows only
            if ids.numel():
                states = final_states[ids] if final_states is not None else None
                rows = hidden[ids] if hidden is not None else None
                values[ids] = model.denormalize_value(model.step(final_obs[ids], states, rows)[2])
            return values
        # on a GPU a masked evaluation would sync every step: evaluate all rows instead
        return model.denormalize_value(model.step(final_obs, final_states, hidden)[2]) * time_outs

    def _check_finite(self, buf: RolloutBuffer, last_obs: torch.Tensor,
                      last_states: Optional[torch.Tensor] = None) -> None:
        """The batch's observations (and the one after it; the critic's too), then its rewards; env ids named for
        observations."""
        steps, envs = buf.rollout_length, buf.num_envs
        bad = torch.cat((nonfinite_rows(buf.obs.view(steps * envs, -1)) % envs, nonfinite_rows(last_obs)))
        if buf.states is not None:
            states = buf.states.view(steps * envs, -1)
            bad = torch.cat((bad, nonfinite_rows(states) % envs, nonfinite_rows(last_states)))
        if bad.numel():
            ids = sorted(set(bad.tolist()))
            shown = ", ".join(str(i) for i in ids[:10]) + (", ..." if len(ids) > 10 else "")
            raise NonFiniteError(f"non-finite observation from env ids {shown}: training stopped")
        if nonfinite_rows(buf.rewards.view(-1, 1)).numel():
            raise NonFiniteError(
                "non-finite reward (env reward times agent.reward_scale, or a time-out's bootstrapped value): "
                "training stopped"
            )


@dataclasses.dataclass
class Collected:
    """A finished batch: its plan, buffer slot, contents and the number of updates its policy had seen."""

    plan: Plan
    slot: int
    buffer: RolloutBuffer
    info: Dict[str, Any]
    policy_version: int  # updates the collecting policy had seen
    concurrent: bool = True  # collected on the background thread (during the previous update)
    # the collecting policy's parameters when the batch is stale (HTS-RL's delayed update computes its step there:
    # agent/stale.py); None for a batch of the live policy
    behaviour: Optional[Dict[str, torch.Tensor]] = None


class BackgroundCollection:
    """HTS-RL's concurrent collection: batch k+1 is collected on a thread with a snapshot of the policy
    (parameters and normalisers) taken before update k, while update k runs on the main thread.

    The behaviour policy's log-probs and values are stored with the batch, so PPO's ratio is against the
    policy that acted, exactly one update stale. The env is only ever stepped by one collection at a time,
    so its state runs on continuously across batches. MuJoCo's batch step releases the GIL; on a GPU the
    thread works on its own CUDA stream.
    """

    def __init__(self, collector: SyncCollector, model: ActorCritic):
        self.collector = collector
        self.snapshot = copy.deepcopy(model).requires_grad_(False)
        device = collector.device
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self._thread: Optional[threading.Thread] = None
        self._result: Optional[Collected] = None
        self._error: Optional[BaseException] = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, plan: Plan, model: ActorCritic, policy_version: int, slot: int) -> None:
        """Snapshot model now and collect plan's batch into buffer slot on a thread."""
        assert self._thread is None, "one background collection at a time"
        self.snapshot.load_state_dict(model.state_dict())
        if self.stream is not None:
            self.stream.wait_stream(torch.cuda.current_stream(self.collector.device))  # the snapshot copy
        self._result, self._error = None, None
        self._thread = threading.Thread(
            target=self._collect, args=(plan, policy_version, slot), name="isaac-ppo-collect", daemon=True
        )
        self._thread.start()

    def wait(self) -> Collected:
        """The batch, once collected; an error of the collection (e.g. a non-finite observation) is raised here."""
        assert self._thread is not None, "no background collection was started"
        self._thread.join()
        self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        result, self._result = self._result, None
        return result

    def _collect(self, plan: Plan, policy_version: int, slot: int) -> None:
        try:
            if self.stream is not None:
                with torch.cuda.stream(self.stream):
                    buffer, info = self.collector.collect(plan, self.snapshot, slot)
                self.stream.synchronize()
            else:
                buffer, info = self.collector.collect(plan, self.snapshot, slot)
            self._result = Collected(plan, slot, buffer, info, policy_version, behaviour=parameters_of(self.snapshot))
        except BaseException as error:  # handed to the main thread by wait()
            self._error = error


def parameters_of(model: ActorCritic) -> Dict[str, torch.Tensor]:
    """A copy of model's trainable parameters by name (not its normalisers' statistics)."""
    return {name: value.detach().clone() for name, value in model.named_parameters()}
