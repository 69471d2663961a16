"""Where each iteration's batch comes from, and the state of a batch in flight.

A batch source hands the loop iteration k's batch (`take`) and, once its advantages are computed and before
the update, may start on the next one (`before_update`). Two implementations of that one interface:

- SyncBatches collects batch k when asked, with the live policy (none is ever in flight);
- ConcurrentBatches (HTS-RL) collects batch k+1 on a thread with a snapshot of the policy taken before
  update k, so every batch but the first is exactly one update stale. Its state (the batch collected ahead,
  or the behaviour policy of a batch not yet begun) is saved in checkpoints, so a resumed run collects the
  same batches as an uninterrupted one.

A run's plans share one mode (the scheduler's), which picks the source once (`for_mode`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional

import torch

from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.agent.rollout import RolloutBuffer
from isaac_ppo.loop.collect import BackgroundCollection, Collected, SyncCollector, parameters_of
from isaac_ppo.scheduler import Plan

BUFFER_FIELDS = ("obs", "actions", "log_probs", "mu", "log_std", "values", "rewards", "dones")
OPTIONAL_FIELDS = ("states", "hidden")  # the critic's observations (asymmetric envs); the chunks' states (recurrent)
NextPlan = Callable[[], Optional[Plan]]  # iteration k+1's plan, or None when it will not run in this process


class SyncBatches:
    """Each batch collected when its iteration asks, with the policy as it is then."""

    def __init__(self, collector: SyncCollector, collect_threads: int):
        self.collector = collector
        # on a CPU the env's physics threads and torch's share the cores: the small per-step tensor ops run
        # best on collect_threads (1 by default), the update's large matrix products on the update's threads
        self.collect_threads = collect_threads

    def take(self, k: int, plan: Plan) -> Collected:
        return self._collect_now(plan, None, policy_version=k)

    def _collect_now(self, plan: Plan, model: Optional[ActorCritic], policy_version: int) -> Collected:
        """Collect plan's batch on this thread into slot 0 (model None: the live policy)."""
        torch.set_num_threads(self.collect_threads)
        buffer, info = self.collector.collect(plan, model, slot=0)
        return Collected(plan, 0, buffer, info, policy_version, concurrent=model is not None,
                         behaviour=None if model is None else parameters_of(model))

    def before_update(self, k: int, batch: Collected, next_plan: NextPlan) -> None:
        """Nothing is collected ahead: the next plan is asked for after this update is observed."""

    def settle(self) -> None:
        """No batch is ever in flight."""

    def abandon(self) -> None:
        """Nothing runs beside the loop."""

    def state_dict(self) -> Dict[str, Any]:
        return {"pending": None, "behaviour": None}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Nothing to restore."""


class ConcurrentBatches(SyncBatches):
    """Batch k+1 collected during update k with the policy from before it (HTS-RL)."""

    def __init__(self, collector: SyncCollector, collect_threads: int, model: ActorCritic,
                 new_model: Callable[[], ActorCritic]):
        super().__init__(collector, collect_threads)
        self.model = model
        self.new_model = new_model  # an empty model of the run's shape (for a saved behaviour policy)
        self.background: Optional[BackgroundCollection] = None  # made at the first batch collected ahead
        self.ready: Optional[Collected] = None  # the batch collected ahead for the next iteration
        self.behaviour: Optional[Dict[str, torch.Tensor]] = None  # the policy for a batch not yet begun

    def take(self, k: int, plan: Plan) -> Collected:
        self.settle()
        if self.ready is not None:
            batch, self.ready = self.ready, None
            if batch.plan != plan:
                raise RuntimeError(f"the batch collected ahead was for {batch.plan}, iteration {k} plans {plan}")
            return batch
        if self.behaviour is None:  # the run's first batch: there was no update to collect beside
            return super().take(k, plan)
        # resumed where the run stopped before collecting ahead: the parameters it would have collected with
        behaviour = self.new_model()
        behaviour.load_state_dict(self.behaviour)
        self.behaviour = None
        return self._collect_now(plan, behaviour, policy_version=k - 1)

    def before_update(self, k: int, batch: Collected, next_plan: NextPlan) -> None:
        """Start batch k+1 with a snapshot of the policy before update k; when iteration k+1 will not run in
        this process (a budget or a stop ends it first), keep that policy instead, so a resumed run collects
        batch k+1 with exactly the parameters the uninterrupted run would have."""
        plan = next_plan()
        if plan is None:
            self.behaviour = {name: value.clone() for name, value in self.model.state_dict().items()}
            return
        if self.background is None:
            self.background = BackgroundCollection(self.collector, self.model)
        self.background.start(plan, self.model, policy_version=k, slot=1 - batch.slot)

    def settle(self) -> None:
        """Wait for a batch in flight, keeping it for its iteration."""
        if self.background is not None and self.background.running:
            self.ready = self.background.wait()

    def abandon(self) -> None:
        """On the way out (also on errors): never leave a thread stepping the env."""
        try:
            self.settle()
        except BaseException:  # the run is ending with the error that brought us here
            pass

    def state_dict(self) -> Dict[str, Any]:
        self.settle()
        return {"pending": _collected_state(self.ready), "behaviour": self.behaviour}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.ready = self._restore(state.get("pending"))
        self.behaviour = state.get("behaviour")

    def _restore(self, saved: Optional[Mapping[str, Any]]) -> Optional[Collected]:
        if saved is None:
            return None
        plan, slot, env = Plan(**saved["plan"]), saved["slot"], self.collector.env
        buffer = RolloutBuffer(plan.rollout_length, plan.num_envs, env.num_obs, env.num_actions,
                               self.collector.device, self.collector.num_states, self.model.state_size,
                               self.collector.seq_length, self.model.zero_on_done)
        for name in BUFFER_FIELDS + tuple(name for name in OPTIONAL_FIELDS if getattr(buffer, name) is not None):
            getattr(buffer, name).copy_(saved["buffer"][name])
        self.collector.buffers[slot] = buffer
        info = dict(saved["info"])
        info["last_values"] = info["last_values"].to(self.collector.device)
        return Collected(plan, slot, buffer, info, saved["policy_version"], concurrent=saved["concurrent"],
                         behaviour=saved.get("behaviour"))


def for_mode(mode: str, collector: SyncCollector, collect_threads: int, model: ActorCritic,
             new_model: Callable[[], ActorCritic]) -> SyncBatches:
    """The batch source of a run whose plans have this mode."""
    if mode == "concurrent":
        return ConcurrentBatches(collector, collect_threads, model, new_model)
    return SyncBatches(collector, collect_threads)


def _collected_state(batch: Optional[Collected]) -> Optional[Dict[str, Any]]:
    if batch is None:
        return None
    return {
        "plan": dataclasses.asdict(batch.plan), "slot": batch.slot, "policy_version": batch.policy_version,
        "concurrent": batch.concurrent,
        "buffer": {name: getattr(batch.buffer, name) for name in BUFFER_FIELDS + OPTIONAL_FIELDS
                   if getattr(batch.buffer, name) is not None},
        "info": dict(batch.info),
        "behaviour": batch.behaviour,
    }
