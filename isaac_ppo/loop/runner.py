"""The training loop over already-built parts (loop/build.py); it owns the counters. Per iteration k (step, and
_iterate after it; docs/architecture.md, "One iteration"): scheduler.plan, batches.take (collected now or during
update k-1), buffer.compute_gae, batches.before_update, ppo.absorb_batch_statistics, ppo.update, probe.measure,
evaluator.when_due, scheduler.observe; then logger.log(row) and checkpointer.after_iteration(...)."""
from __future__ import annotations

import dataclasses
import random
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from isaac_ppo.envs.episodes import DivergenceLimit
from isaac_ppo.errors import NonFiniteError, RunFailure, UserError
from isaac_ppo.io import checkpoint
from isaac_ppo.io.logger import iteration_row
from isaac_ppo.scheduler import Plan
from isaac_ppo.loop.resume import check_resumable
from isaac_ppo.loop.stops import StopRequests


class Runner:
    """One rank's loop. With several ranks (`comm`, multi_gpu=true) each collects its own batch from its own envs;
    the learner stays one (distributed.py), and rank 0 alone decides plans, measures diagnostics and writes."""

    def __init__(self, cfg: DictConfig, env: Any, *, model: Any, ppo: Any, probe: Any, scheduler: Any,
                 collector: Any, batches: Any, checkpointer: Any, logger: Any, comm: Any, update_threads: int,
                 budgets: Tuple[Optional[int], Optional[int]], evaluator: Any):
        self.cfg, self.env, self.model, self.ppo, self.probe, self.evaluator = cfg, env, model, ppo, probe, evaluator
        self.scheduler, self.collector, self.batches, self.checkpointer = scheduler, collector, batches, checkpointer
        self.logger, self.comm, self.update_threads = logger, comm, update_threads  # (this rank's share of threads)
        self.max_iterations, self.max_env_steps = budgets
        self.planned: Dict[int, Plan] = {}  # plans asked of the scheduler for iterations not yet run
        self.iteration, self.env_steps, self.wall_s = 0, 0, 0.0
        self.history: List[Dict[str, Any]] = []  # this process's rows (not restored on resume)
        self.stops = StopRequests("saving a checkpoint at the end of this iteration")
        self.stop_agreed = False  # every rank knows of a stop request (checked once per iteration, together)
        self.divergence = DivergenceLimit(cfg)

    def resume(self, path: str) -> bool:
        """Load the whole training state of checkpoint `path`; False when its budget is used up (nothing to run)."""
        self.load_state_dict(checkpoint.load(path), path)  # (on the CPU: each part copies onto its own device)
        if self.plan_of(self.iteration, self.env_steps) is None:
            return False
        if self.comm.is_main:
            print(f"[{self.cfg.task.name}] resuming from {path} at iteration {self.iteration}")
        return True

    def run(self) -> Dict[str, Any]:
        if self.logger is not None:
            self.logger.begin(self.iteration, self.env_steps)
        self.checkpointer.remove_leftovers()
        with self.stops:
            try:
                self._iterate()
                # the end of the run and a preemption (SIGTERM, Ctrl-C) both leave last.pt at an iteration boundary
                path = self.checkpointer.save("last.pt", self.state_dict())
                summary = self._finish(path)
            except RunFailure as failure:  # keep what can be kept: last.pt if the state is at a logged row
                whole = self.logged == self.iteration and self.comm.world_size == 1  # (saving takes every rank)
                kept = self.checkpointer.save_after_failure(self.state_dict if whole else None, self.iteration)
                raise RunFailure(f"{failure}; {kept}") from None
            finally:
                self.batches.abandon()
                if self.logger is not None:
                    self.logger.close()
        if self.stops.requested:
            if self.comm.is_main:
                print(f"stopped by {self.stops.requested} after iteration {self.iteration}; checkpoint {path}")
            self.stops.hand_on_preemption()
        return summary

    def _iterate(self) -> None:
        """Iterations until a budget is used up or a stop is agreed: each logged, checked and saved."""
        self.logged = self.iteration  # the iterations before it have their row on disk
        while not self._stop_agreed_now():
            row = self.step()
            if row is None:  # a budget (iterations or env steps) is used up
                return
            if self.logger is not None:
                self.logger.log(row)
            self.logged = self.iteration
            self.divergence.check(row)  # (after the row is logged: it records the divergences)
            self.checkpointer.after_iteration(row["iteration"], self.state_dict, self.policy_state,
                                             self.evaluator.score(row.get("eval"), row["window_mean_return"]))

    def _finish(self, last_checkpoint: str) -> Dict[str, Any]:
        """metrics.json (rank 0) and the diagnostics panel."""
        extra: Dict[str, Any] = {"last_checkpoint": last_checkpoint, "stopped_by": self.stops.requested}
        if self.evaluator.final and not self.stops.requested:  # (a preempted run ends now)
            extra["final_eval"] = self.evaluator(self.model, self.env_steps, self.iteration - 1, self.wall_s)
            self.checkpointer.offer_best(self.evaluator.score(extra["final_eval"], None), self.policy_state)
        extra.update(self.evaluator.solve_record())
        if self.comm.world_size > 1:  # equal digests: every rank ends with bit-identical learner state
            learner = [t for _, t in sorted(self.model.state_dict().items())]
            extra.update(world_size=self.comm.world_size, rank_digests=self.comm.digests(learner))
        summary = self.logger.summary(extra) if self.logger is not None else {}
        self.probe.write_panel(self.checkpointer.run_dir, self.cfg.task.name)
        return summary

    def step(self) -> Optional[Dict[str, Any]]:
        """Run iteration self.iteration; None when a budget is used up."""
        k = self.iteration
        plan = self.plan_of(k, self.env_steps)
        if plan is None:
            return None
        t0 = time.perf_counter()
        self.ppo.schedule_lr(self._progress())
        batch = self.batches.take(k, plan)
        t1 = time.perf_counter()
        staleness = k - batch.policy_version
        # HTS-RL's contract: a batch collected beside update k-1 is exactly one update stale, any other none
        assert staleness == (1 if batch.concurrent else 0), f"batch of iteration {k} is {staleness} updates stale"
        steps = plan.batch_size * self.comm.world_size  # env steps count every rank's envs
        buffer = batch.buffer
        buffer.compute_gae(batch.info["last_values"], self.cfg.agent.gamma, self.cfg.agent.lam)
        self.batches.before_update(k, batch, lambda: self._plan_ahead(k + 1, self.env_steps + steps))
        torch.set_num_threads(self.update_threads)
        self.ppo.absorb_batch_statistics(buffer, "before_update")  # (agent.normalizer_update says which call does)
        self.ppo.grad_observer = self.probe.arm(k)
        stats = self.ppo.update(buffer, plan, stale=staleness > 0, behaviour=batch.behaviour)
        self.ppo.grad_observer = None
        t_probe = time.perf_counter()
        diag = self.probe.measure(k, buffer)  # {} unless due; sees the normalisers the update used
        probe_s = time.perf_counter() - t_probe
        self.ppo.absorb_batch_statistics(buffer, "after_update")
        self._check_learner_finite(k)
        t2 = time.perf_counter()
        evaluation = self.evaluator.when_due(self.model, self.env_steps, steps, k, self.wall_s + t2 - t0)  # (apart)
        info = self.comm.episodes_of_all_ranks(batch.info)
        self.iteration, self.env_steps = self.iteration + 1, self.env_steps + steps
        self.wall_s += t2 - t0
        self.planned.pop(k, None)
        row = iteration_row(k, self.env_steps, self.wall_s, plan, steps, staleness, info,
                            collect_s=info["collect_s"], update_s=t2 - t1, iteration_s=t2 - t0, wait_s=t1 - t0)
        row.update(stats)
        if evaluation:
            row["eval"] = evaluation
        if diag:
            row["diagnostics"] = diag
            row["diagnostics_s"] = round(probe_s, 4)  # the measurement's own cost (inside update_s)
        self.scheduler.observe(k, row, diag)
        events = self.scheduler.take_events()
        if events:
            row["scheduler_events"] = events
        self.history.append(row)
        return row

    def plan_of(self, k: int, env_steps_before: int) -> Optional[Plan]:
        """Iteration k's plan, asked of the scheduler once; None when a budget ends before iteration k."""
        if self.max_iterations is not None and k >= self.max_iterations:
            return None
        if k not in self.planned:
            # decided on rank 0 (whose scheduler alone sees the diagnostics) and the same everywhere
            plan = self.comm.broadcast_object(self.scheduler.plan(k, self.history) if self.comm.is_main else None)
            self.planned[k] = plan.check(self.env.num_envs, f"iteration {k}'s plan from scheduler._target_")
            if plan.mode != self.cfg.scheduler.get("mode", "sync"):
                raise UserError(f"iteration {k}'s plan has mode={plan.mode}: a run's plans keep scheduler.mode")
        plan = self.planned[k]
        if self.max_env_steps is not None and env_steps_before + plan.batch_size * self.comm.world_size > self.max_env_steps:
            return None  # the budget is never exceeded: the run ends at or just under max_env_steps
        return plan

    def _plan_ahead(self, k: int, env_steps_before: int) -> Optional[Plan]:
        """Iteration k's plan for a batch collected ahead; None when iteration k will not run in this process."""
        if self.stop_agreed if self.comm.world_size > 1 else self.stops.requested:
            return None  # (several ranks must all ask for the next plan, or none)
        return self.plan_of(k, env_steps_before)

    def _stop_agreed_now(self) -> bool:
        """Whether the run stops before the next iteration: a stop request on any rank stops them all there."""
        if self.comm.world_size == 1:
            self.stop_agreed = self.stops.requested is not None
        else:
            self.stop_agreed = self.comm.any(self.stops.requested is not None)
            if self.stop_agreed and self.stops.requested is None:
                self.stops.requested = "a stop request on another rank"
        return self.stop_agreed

    def _progress(self) -> float:
        """How far through its budget the run is, in [0, 1] (for the linear learning-rate schedule)."""
        done = ((self.iteration, self.max_iterations), (self.env_steps, self.max_env_steps))
        return max([0.0] + [count / budget for count, budget in done if budget])

    def _check_learner_finite(self, k: int) -> None:
        """A finite loss can still take a step to NaN: stop at that update, before anything is saved."""
        bad = checkpoint.first_non_finite({"parameter": dict(self.model.named_parameters()),
                                           "normaliser": dict(self.model.named_buffers()),
                                           "optimizer state": self.ppo.optimizer.state_dict()["state"]})
        if bad is not None:
            raise NonFiniteError(f"non-finite {bad.replace('.', ' ', 1)} after the update of iteration {k}: training "
                                 "stopped; the checkpoints on disk are the last good ones (a smaller "
                                 "agent.learning_rate?)")

    def state_dict(self) -> Dict[str, Any]:
        """The whole training state. With several ranks every rank must call it (their own envs, batches and
        random streams are gathered to rank 0, under "ranks"); only rank 0's return value is complete."""
        self.batches.settle()  # a batch in flight is finished first and saved with the rest
        local = dict(self.batches.state_dict(), rng={
            "agent": self.ppo.generator.get_state(), "collect": self.collector.generator.get_state(),
            "probe": self.probe.state_dict(), "torch": torch.get_rng_state(), "numpy": np.random.get_state(),
            "eval": self.evaluator.state_dict(), "python": random.getstate(),
        }, env=self.env.state_dict() if hasattr(self.env, "state_dict") else None, obs=self.collector.obs,
            states=self.collector.states, hidden=self.collector.hidden, episodes=self.collector.tracker.state_dict())
        state = dict(local, ranks=self.comm.gather_objects(local)) if self.comm.world_size > 1 else dict(local)
        state.update({
            "model": self.model.state_dict(), "ppo": self.ppo.state_dict(), "scheduler": self.scheduler.state_dict(),
            "planned": {k: dataclasses.asdict(plan) for k, plan in self.planned.items()},
            "counters": {"iteration": self.iteration, "env_steps": self.env_steps, "wall_s": self.wall_s},
            "world_size": self.comm.world_size, "best_return": self.checkpointer.best_return,
            "config": OmegaConf.to_yaml(self.cfg, resolve=True), "task": self.cfg.task.name,
            "num_obs": self.env.num_obs, "num_actions": self.env.num_actions, "num_states": self.collector.num_states,
        })
        return state

    def policy_state(self) -> Dict[str, Any]:
        """What play and checkpoint= read (best.pt): the model with its normalisers, and what it is for."""
        return {"model": self.model.state_dict(), "task": self.cfg.task.name, "num_obs": self.env.num_obs,
                "num_actions": self.env.num_actions, "num_states": self.collector.num_states,
                "config": OmegaConf.to_yaml(self.cfg, resolve=True), "counters": {
                    "iteration": self.iteration, "env_steps": self.env_steps, "wall_s": self.wall_s}}

    def load_state_dict(self, state: Mapping[str, Any], path: str) -> None:
        check_resumable(state, path, self.cfg.task.name, self.env, self.comm.world_size)
        checkpoint.load_model(self.model, state, path)
        self.ppo.load_state_dict(state["ppo"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.planned = {int(k): Plan(**plan) for k, plan in state.get("planned", {}).items()}
        counters = state["counters"]
        self.iteration, self.env_steps, self.wall_s = counters["iteration"], counters["env_steps"], counters["wall_s"]
        self.checkpointer.best_return = state.get("best_return")
        mine = state["ranks"][self.comm.rank] if "ranks" in state else state
        self.batches.load_state_dict(mine)
        rng = mine["rng"]
        self.ppo.generator.set_state(rng["agent"])
        if "collect" in rng:
            self.collector.generator.set_state(rng["collect"])
        self.probe.load_state_dict(rng.get("probe"))
        self.evaluator.load_state_dict(rng.get("eval"))
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        if mine["env"] is not None and hasattr(self.env, "load_state_dict"):
            self.env.load_state_dict(mine["env"])
            self.collector.restore_observations(mine["obs"], mine.get("states"), mine.get("hidden"))
        self.collector.tracker.load_state_dict(mine["episodes"])
