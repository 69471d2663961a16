"""Evaluation: a policy's return, measured without bias, with its uncertainty.

Every env of the evaluation set plays from reset until its first episode ends, and counts exactly that episode.
Counting instead the first N episodes to *end* over a set of envs (play's old protocol) over-represents short
episodes: a short (failed) episode ends, resets and ends again before a long one ends once. One checkpoint gave
14.28 over 10 such episodes and 27.45 over 512. Each env's first episode is one draw from the policy's episode
distribution, whatever the lengths, so the mean over envs is unbiased and its bootstrap CI means what it says.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from isaac_ppo.agent.acting import Acting, ended
from isaac_ppo.stats import iqm, stratified_bootstrap_ci

Policy = Callable[[torch.Tensor], torch.Tensor]


def first_episodes(env: Any, policy: Policy, on_step: Optional[Callable[[], None]] = None) -> Dict[str, Any]:
    """Reset every env, step until each has ended its first episode; that episode's return and length per env,
    and whether its simulation diverged (such an episode is no sample of the policy: summarise leaves it out).
    Envs that finished keep stepping (the pool steps as one) but count no more. on_step runs after every step
    (a video recorder). measures: each of the task's step measures (extras["measures"], e.g. a legged robot's
    tracking error in m/s) averaged over that episode's steps, per env; empty for a task that reports none. outcomes
    (extras["outcomes"], e.g. FrankaCabinet's drawer_opened) are read at the episode's last step instead, and join
    the measures under their names (their mean over episodes is a success rate)."""
    n, device = env.num_envs, env.device  # (kept on the env's device: one host read a step, for the loop's end)
    returns = torch.zeros(n, dtype=torch.float64, device=device)
    lengths = torch.zeros(n, dtype=torch.long, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    diverged = torch.zeros(n, dtype=torch.bool, device=device)
    measure_sums: Dict[str, torch.Tensor] = {}
    outcomes: Dict[str, torch.Tensor] = {}
    obs = env.reset()["obs"]
    with torch.no_grad():
        while not bool(done.all()):
            obs_dict, rewards, resets, extras = env.step(policy(obs))
            ended(policy, resets)
            if on_step is not None:
                on_step()
            live = ~done
            returns += torch.where(live, rewards.double(), 0.0)
            lengths += live.long()
            for name, value in extras.get("measures", {}).items():
                total = measure_sums.setdefault(name, torch.zeros(n, dtype=torch.float64, device=device))
                total += torch.where(live, value.double(), 0.0)
            for name, value in extras.get("outcomes", {}).items():
                ending = live & resets.bool()
                outcome = outcomes.setdefault(name, torch.zeros(n, dtype=torch.float64, device=device))
                outcome[ending] = value.double()[ending]
            if "diverged_envs" in extras:
                diverged |= live & extras["diverged_envs"].bool()
            done |= resets.bool()
            obs = obs_dict["obs"]
    measures = {name: (total / lengths.clamp(min=1)).cpu() for name, total in measure_sums.items()}
    measures.update({name: value.cpu() for name, value in outcomes.items()})
    return {"returns": returns.cpu(), "lengths": lengths.cpu(), "diverged": diverged.cpu(), "measures": measures}


def summarise(returns: torch.Tensor, lengths: torch.Tensor, reps: int = 2000, seed: int = 0,
              diverged: Optional[torch.Tensor] = None,
              measures: Optional[Dict[str, torch.Tensor]] = None) -> Dict[str, Any]:
    """Mean and IQM of the returns, the 95% bootstrap CI of the IQM (the report's statistics, over episodes here
    instead of runs) and the mean length, over the episodes whose simulation did not diverge (counted apart).
    measures (first_episodes'): each one's mean over those episodes, under its own name (eval.NAME in a run's
    rows, e.g. eval.tracking_error_xy_mps), beside the return."""
    kept = ~diverged if diverged is not None else torch.ones(len(returns), dtype=torch.bool)
    values, kept_lengths = returns[kept].double().numpy(), lengths[kept].double()
    result: Dict[str, Any] = {"episodes": len(values), "diverged": int((~kept).sum())}
    if len(values) == 0:  # every simulation diverged: nothing to summarise
        nan = float("nan")
        return dict(result, return_mean=nan, return_iqm=nan, return_ci95=[nan, nan], length_mean=nan,
                    **{name: nan for name in measures or {}})
    low, high = stratified_bootstrap_ci(values, ["all"] * len(values), reps=reps, seed=seed)
    return dict(result, return_mean=float(values.mean()), return_iqm=iqm(values), return_ci95=[low, high],
                length_mean=float(kept_lengths.mean()),
                **{name: float(per_env[kept].mean()) for name, per_env in (measures or {}).items()})


def describe(result: Dict[str, Any], measures: Sequence[str] = ()) -> str:
    """A summary in words: mean return, IQM and its CI (play's line, and a run's last line), then each of the
    named measures' mean (play: every measure the task reports, e.g. ShadowHand's successes)."""
    low, high = result["return_ci95"]
    shown = "".join(f", {name} {result[name]:.3g}" for name in measures if name in result)
    return (f"mean return {result['return_mean']:.2f}, IQM {result['return_iqm']:.2f} "
            f"(95% CI {low:.2f} to {high:.2f}){shown}")


def describe_run(summary: Dict[str, Any], window: int) -> str:
    """A finished run's numbers for its last line: the final evaluation (the one to compare), then the lagged
    training return."""
    final = summary.get("final_eval")
    # a task whose success is a measure (its solve_measures: FrankaCabinet's drawer_opened) shows it beside the return
    measured = list(dict.fromkeys(e["measure"] for e in summary.get("measure_solve_times") or []))
    evaluation = f"evaluation over {final['episodes']} episodes: {describe(final, measured)}; " if final else ""
    training = summary.get("final_window_mean_return")
    # (NaN when the window is empty: a short run's envs may not have ended an episode yet)
    finished = training is not None and math.isfinite(training)
    training = f"{training:.2f}" if finished else "n/a (no episode finished)"
    return f"{evaluation}training return {training} (the last {window} finished episodes, lagged)"


def mean_action(model: Any) -> Acting:
    """The deterministic policy: the Gaussian's mean."""
    return Acting(model)


def sampled_action(model: Any, generator: torch.Generator) -> Acting:
    """The stochastic policy, as training samples it: mean + std * noise, the noise from `generator`."""
    return Acting(model, generator)


class Evaluator:
    """The periodic evaluation of a training run: every `eval.interval_env_steps` env steps, and once at the end when
    `eval.final`, the current policy's mean action on its own envs (eval.num_envs, their own seed stream, never
    the training envs), each counting its first episode from reset; with `eval.stochastic`, then also its sampled
    actions (noise from a stream of its own), under "stochastic". None of it touches training: separate envs,
    no gradient, no random numbers from the learner's streams.

    `model`: as Acting's.

    Time to solve: for each of the task's `solve_thresholds`, the first evaluation whose mean return reached it,
    with its env steps and the run's seconds at that moment, evaluation time included (`wall_s`: the training's
    wall clock plus every evaluation's so far); and the same for each threshold of the task's `solve_measures`
    (measure_thresholds: an evaluation measure's name -> its thresholds, e.g. FrankaCabinet's drawer_opened, the
    share of episodes that opened the drawer), for a task whose success is no return."""

    def __init__(self, env: Optional[Any], interval: int, final: bool, stochastic: bool = False, seed: int = 0,
                 thresholds: Tuple[float, ...] = (), measure_thresholds: Optional[Dict[str, Tuple[float, ...]]] = None):
        self.env = env  # None: no evaluation (ranks other than 0, or eval.interval_env_steps=0 and eval.final=false)
        self.interval = interval if env is not None else 0
        self.final = final and env is not None
        self.noise = torch.Generator(device=env.device).manual_seed(seed) if stochastic and env is not None else None
        self.spent_s = 0.0  # every evaluation's seconds, this run's (resumes included)
        self.solved: Dict[float, Dict[str, Any]] = {}  # threshold -> the first evaluation that reached it
        self.thresholds = tuple(float(t) for t in thresholds)
        self.measure_thresholds = {name: tuple(float(t) for t in values)
                                   for name, values in (measure_thresholds or {}).items()}
        self.solved_measures: Dict[str, Dict[float, Dict[str, Any]]] = {name: {} for name in self.measure_thresholds}

    def when_due(self, model: Any, env_steps_before: int, steps: int, iteration: int,
                 wall_s: float = 0.0) -> Optional[Dict[str, Any]]:
        """The evaluation after update `iteration` when it took the run across a multiple of eval.interval_env_steps env
        steps (from env_steps_before to env_steps_before + steps), else None. wall_s: the training's wall clock."""
        after = env_steps_before + steps
        if self.interval > 0 and after // self.interval > env_steps_before // self.interval:
            return self(model, after, iteration, wall_s)
        return None

    def __call__(self, model: Any, env_steps: int, iteration: int, wall_s: float = 0.0) -> Dict[str, Any]:
        """Evaluate the policy after update `iteration` (its version iteration + 1) at env_steps."""
        started = time.perf_counter()
        result = self._play(mean_action(model), iteration)
        if self.noise is not None:
            result["stochastic"] = self._play(sampled_action(model, self.noise), iteration)
        seconds = time.perf_counter() - started
        self.spent_s += seconds
        result.update(env_steps=env_steps, policy_version=iteration + 1, seconds=round(seconds, 3),
                      wall_s=round(wall_s + self.spent_s, 3))
        reached = {"seconds": result["wall_s"], "env_steps": env_steps}
        for threshold in self.thresholds:
            if threshold not in self.solved and result["return_mean"] >= threshold:
                self.solved[threshold] = reached
        for name, values in self.measure_thresholds.items():
            for threshold in values:  # (NaN, every episode diverged, reaches nothing)
                if threshold not in self.solved_measures[name] and result.get(name, math.nan) >= threshold:
                    self.solved_measures[name][threshold] = reached
        return result

    def solve_times(self) -> List[Dict[str, Any]]:
        """metrics.json's solve_times: per threshold, the seconds and env steps of the first evaluation that reached
        it (null when none did)."""
        return [dict({"threshold": t, "seconds": None, "env_steps": None}, **self.solved.get(t, {}))
                for t in self.thresholds]

    def measure_solve_times(self) -> List[Dict[str, Any]]:
        """metrics.json's measure_solve_times: solve_times for each threshold of each of the task's solve_measures."""
        return [dict({"measure": name, "threshold": t, "seconds": None, "env_steps": None},
                     **self.solved_measures[name].get(t, {}))
                for name, values in self.measure_thresholds.items() for t in values]

    def solve_record(self) -> Dict[str, List[Dict[str, Any]]]:
        """What metrics.json records of time to solve: solve_times, and measure_solve_times for a task with
        solve_measures."""
        record = {"solve_times": self.solve_times()}
        if self.measure_thresholds:
            record["measure_solve_times"] = self.measure_solve_times()
        return record

    def _play(self, policy: Policy, iteration: int) -> Dict[str, Any]:
        episodes = first_episodes(self.env, policy)
        return summarise(episodes["returns"], episodes["lengths"], seed=iteration, diverged=episodes["diverged"],
                         measures=episodes["measures"])

    def score(self, evaluation: Optional[Dict[str, Any]], training_return: Optional[float]) -> Optional[float]:
        """What best.pt is chosen by: the evaluation's mean return when the run evaluates periodically (None where
        there is no evaluation), else the training return."""
        if self.interval > 0:
            return evaluation["return_mean"] if evaluation else None
        return training_return

    def state_dict(self) -> Optional[Dict[str, Any]]:
        """The eval envs' state (their reset stream) and the noise's: a resumed run evaluates as the
        uninterrupted one."""
        if self.env is None or not hasattr(self.env, "state_dict"):
            return None
        state = self.env.state_dict()
        if self.noise is not None:
            state["eval_noise"] = self.noise.get_state()
        state["eval_clock"] = {"spent_s": self.spent_s, "solved": {str(t): v for t, v in self.solved.items()},
                               "solved_measures": {name: {str(t): v for t, v in solved.items()}
                                                   for name, solved in self.solved_measures.items()}}
        return state

    def load_state_dict(self, state: Optional[Dict[str, Any]]) -> None:
        if state is not None and self.env is not None and hasattr(self.env, "load_state_dict"):
            state = dict(state)
            noise = state.pop("eval_noise", None)
            clock = state.pop("eval_clock", {"spent_s": 0.0, "solved": {}})
            self.spent_s = clock["spent_s"]
            self.solved = {float(t): v for t, v in clock["solved"].items()}
            saved = clock.get("solved_measures", {})  # (none in a checkpoint from before solve_measures)
            self.solved_measures = {name: {float(t): v for t, v in saved.get(name, {}).items()}
                                    for name in self.measure_thresholds}
            self.env.load_state_dict(state)
            if noise is not None and self.noise is not None:
                self.noise.set_state(noise)
