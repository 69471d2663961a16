"""Episode bookkeeping on the env's device: returns and lengths of finished episodes.

``update`` runs once per step with no host synchronisation (it only does tensor arithmetic on the device);
``drain`` reads the accumulated figures back once, e.g. per training iteration.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Union

import torch

from isaac_ppo.errors import DivergedError


class EpisodeTracker:
    """Running return and length per env; totals over the episodes finished since the last drain; and a window
    of the last `window` finished episodes (over all envs), rl-games' `games_to_track`. With the env's reward
    terms (extras["reward_terms"]), also each term's sum per finished episode (legged_gym's Episode/rew_*)."""

    def __init__(self, num_envs: int, device: Union[str, torch.device] = "cpu", window: int = 100):
        self.device = torch.device(device)
        self.window = int(window)
        self.running_return = torch.zeros(num_envs, dtype=torch.float64, device=self.device)
        self.running_length = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self._sums = torch.zeros(3, dtype=torch.float64, device=self.device)  # count, return, length
        # the window: a ring of the last `window` episodes' return and length, with one spare slot that the
        # rows that did not end write to (so that updating it needs no host synchronisation)
        self.recent_returns = torch.zeros(self.window + 1, dtype=torch.float64, device=self.device)
        self.recent_lengths = torch.zeros(self.window + 1, dtype=torch.float64, device=self.device)
        self.recent_count = torch.zeros((), dtype=torch.long, device=self.device)  # episodes ever put in
        # the reward terms, from the first step that reports them: names, running sums (envs x terms), totals
        self.term_names: List[str] = []
        self.term_running = torch.zeros(num_envs, 0, dtype=torch.float64, device=self.device)
        self._term_sums = torch.zeros(0, dtype=torch.float64, device=self.device)

    def update(self, rewards: torch.Tensor, resets: torch.Tensor, excluded: Optional[torch.Tensor] = None,
               terms: Optional[Mapping[str, torch.Tensor]] = None) -> None:
        """Account one step of the first len(rewards) envs (the active ones). Episodes ending where `excluded` is
        true (a diverged simulation's) are reset but counted in no statistic. `terms`: the reward's terms."""
        n = rewards.shape[0]
        ret, length = self.running_return[:n], self.running_length[:n]
        ret += rewards
        length += 1
        ended = resets.to(torch.bool)
        done = ended & ~excluded.to(torch.bool) if excluded is not None else ended
        done_f = done.to(torch.float64)
        self._sums[0] += done_f.sum()
        self._sums[1] += (ret * done_f).sum()
        self._sums[2] += (length.to(torch.float64) * done_f).sum()
        self._remember(done, ret, length)
        if terms:
            self._add_terms(terms, n, done_f, ended)
        ret.masked_fill_(ended, 0.0)
        length.masked_fill_(ended, 0)

    def _add_terms(self, terms: Mapping[str, torch.Tensor], n: int, done_f: torch.Tensor, ended: torch.Tensor) -> None:
        if not self.term_names:
            self.term_names = list(terms)
            self.term_running = torch.zeros(self.running_return.shape[0], len(terms), dtype=torch.float64,
                                            device=self.device)
            self._term_sums = torch.zeros(len(terms), dtype=torch.float64, device=self.device)
        running = self.term_running[:n]
        running += torch.stack([terms[name] for name in self.term_names], dim=1).to(torch.float64)
        self._term_sums += (running * done_f[:, None]).sum(dim=0)
        running.masked_fill_(ended[:, None], 0.0)

    def _remember(self, done: torch.Tensor, ret: torch.Tensor, length: torch.Tensor) -> None:
        """Put the episodes that end now into the window, in env order; when more than `window` end at once,
        the last `window` of them. Each kept one gets its own slot, so the scatter has no duplicate index."""
        order = torch.cumsum(done.to(torch.long), 0)  # 1-based rank of each ended episode
        ended = order[-1]
        keep = done & (order > ended - self.window)
        slot = torch.where(keep, (self.recent_count + order - 1) % self.window, torch.full_like(order, self.window))
        self.recent_returns.scatter_(0, slot, ret.to(torch.float64))
        self.recent_lengths.scatter_(0, slot, length.to(torch.float64))
        self.recent_count += ended

    def drain(self) -> Dict[str, Any]:
        """Episodes finished since the last drain: count, mean return, mean length, and each reward term's mean
        sum per episode (nan when none finished)."""
        count, ret, length = self._sums.tolist()
        terms = self._term_sums.tolist()
        self._sums.zero_()
        self._term_sums.zero_()
        if count == 0:
            return {"episodes": 0, "mean_return": math.nan, "mean_length": math.nan,
                    "terms": {name: math.nan for name in self.term_names}}
        return {"episodes": int(count), "mean_return": ret / count, "mean_length": length / count,
                "terms": {name: total / count for name, total in zip(self.term_names, terms)}}

    def recent(self) -> Dict[str, float]:
        """The window: mean return and length of the last `window` finished episodes (fewer before that many
        finished; nan before any). Defined in iterations where none ends, and lagged: at Ant's 1000-step
        episodes they were played by policies up to ~60 updates old."""
        count = min(int(self.recent_count), self.window)
        if count == 0:
            return {"mean_return": math.nan, "mean_length": math.nan, "episodes": 0}
        return {
            "mean_return": float(self.recent_returns[:count].mean()),
            "mean_length": float(self.recent_lengths[:count].mean()),
            "episodes": count,
        }

    def statistics(self) -> Dict[str, Any]:
        """An iteration's training statistics, under their metrics.jsonl names: the episodes that ended since the
        last call (`batch_*`: few or none per iteration when episodes are long), drained, and the window
        (`window_*`)."""
        finished = self.drain()
        window = self.recent()
        return {
            "episodes": finished["episodes"], "batch_mean_return": finished["mean_return"],
            "batch_mean_length": finished["mean_length"], "window_episodes": window["episodes"],
            "window_mean_return": window["mean_return"], "window_mean_length": window["mean_length"],
            "reward_terms": finished["terms"],
        }

    def state_dict(self) -> Dict[str, Any]:
        state: Dict[str, Any] = {name: getattr(self, name).clone() for name in self._STATE}
        state["term_names"] = list(self.term_names)
        return state

    def load_state_dict(self, state: Dict[str, torch.Tensor]) -> None:
        for name in ("running_return", "running_length", "_sums"):
            getattr(self, name).copy_(state[name])
        if state.get("recent_returns", torch.empty(0)).shape == self.recent_returns.shape:
            for name in ("recent_returns", "recent_lengths", "recent_count"):
                getattr(self, name).copy_(state[name])
        # (else a checkpoint from before the window, or with another window size: the window starts empty)
        if state.get("term_names"):
            self.term_names = list(state["term_names"])
            self.term_running = state["term_running"].to(self.device).clone()
            self._term_sums = state["_term_sums"].to(self.device).clone()

    _STATE = ("running_return", "running_length", "_sums", "recent_returns", "recent_lengths", "recent_count",
              "term_running", "_term_sums")


class DivergenceLimit:
    """Stops a run whose simulations keep diverging (wrong scales, a too long timestep): every episode a diverged
    simulation ends is thrown away, so a run past the limit trains on what is left and its returns mean little.

    The share of diverged episodes (config max_diverged_fraction) is judged over windows of at least MIN_EPISODES
    ended episodes (one iteration when episodes are short, several when they are long), so that it judges a rate,
    not a burst: with 20, a trained Ant (IsaacGymEnvs' settings, ~70 episodes an iteration) was stopped at 26.5M
    env steps by 5 divergences in one iteration, about 2% of its episodes over its last 41. At 400, 5% is 20
    episodes. The window is not part of a checkpoint: a resumed run starts a new one."""

    MIN_EPISODES = 400

    def __init__(self, cfg: Any):
        self.max_fraction = cfg.max_diverged_fraction
        env = cfg.task.env
        # what to suggest: the task's actuation scales and the simulation step
        self.causes = [f"task.env.{key}={env[key]:g}" for key in ("powerScale", "maxEffort") if key in env]
        if "mujoco" in cfg.task:
            self.causes.append(f"task.mujoco.timestep={cfg.task.mujoco.timestep:g}")
        self.diverged = self.episodes = 0
        self.first_iteration: Optional[int] = None

    def check(self, row: Mapping[str, Any]) -> None:
        """Account one iteration's row (every rank's counts); stop with one line when its window is full and the
        share is over the limit."""
        iteration = row["iteration"]
        if self.first_iteration is None:
            self.first_iteration = iteration
        self.diverged += row["diverged"]
        self.episodes += row["episodes"] + row["diverged"]  # (row["episodes"] leaves diverged ones out)
        if self.episodes < self.MIN_EPISODES:
            return
        diverged, episodes, first = self.diverged, self.episodes, self.first_iteration
        self.diverged = self.episodes = 0
        self.first_iteration = None
        if diverged <= self.max_fraction * episodes:
            return
        span = f"iteration {iteration}" if first == iteration else f"iterations {first}-{iteration}"
        raise DivergedError(
            f"the simulation diverged in {diverged} of {episodes} episodes ({diverged / episodes:.0%}) of {span}, "
            f"over max_diverged_fraction={self.max_fraction:g}: training stopped (the checkpoints on disk are "
            f"from before). Likely cause: {', '.join(self.causes)} (too strong or too long a step); "
            "max_diverged_fraction=1 trains on regardless")
