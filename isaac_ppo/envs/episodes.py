"""Episode bookkeeping on the env's device: returns and lengths of finished episodes.

``update`` runs once per step with no host synchronisation (it only does tensor arithmetic on the device);
``drain`` reads the accumulated figures back once, e.g. per training iteration.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional, Union

import torch

from isaac_ppo.errors import DivergedError


class EpisodeTracker:
    """Running return and length per env; totals over the episodes finished since the last drain."""

    def __init__(self, num_envs: int, device: Union[str, torch.device] = "cpu"):
        self.device = torch.device(device)
        self.running_return = torch.zeros(num_envs, dtype=torch.float64, device=self.device)
        self.running_length = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        # the last finished episode of each env (nan until it finishes one): a smoothed view for logs
        self.last_return = torch.full((num_envs,), math.nan, dtype=torch.float64, device=self.device)
        self.last_length = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self._sums = torch.zeros(3, dtype=torch.float64, device=self.device)  # count, return, length

    def update(self, rewards: torch.Tensor, resets: torch.Tensor, excluded: Optional[torch.Tensor] = None) -> None:
        """Account one step of the first len(rewards) envs (the active ones). Episodes ending where `excluded` is
        true (a diverged simulation's) are reset but counted in no statistic."""
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
        self.last_return[:n] = torch.where(done, ret, self.last_return[:n])
        self.last_length[:n] = torch.where(done, length, self.last_length[:n])
        ret.masked_fill_(ended, 0.0)
        length.masked_fill_(ended, 0)

    def drain(self) -> Dict[str, float]:
        """Episodes finished since the last drain: count, mean return, mean length (nan when none)."""
        count, ret, length = self._sums.tolist()
        self._sums.zero_()
        if count == 0:
            return {"episodes": 0, "mean_return": math.nan, "mean_length": math.nan}
        return {"episodes": int(count), "mean_return": ret / count, "mean_length": length / count}

    def recent(self, active: Optional[int] = None) -> Dict[str, float]:
        """Mean over the first `active` envs (default all) of each env's last finished episode (nan before
        any finished): a smoothed view, like rl-games' window of recent episodes, that stays defined in
        iterations where none ends. Envs outside the active set are left out: their last episodes are old."""
        last_return, last_length = self.last_return[:active], self.last_length[:active]
        finished = ~torch.isnan(last_return)
        count = int(finished.sum())
        if count == 0:
            return {"mean_return": math.nan, "mean_length": math.nan, "envs": 0}
        return {
            "mean_return": float(last_return[finished].mean()),
            "mean_length": float(last_length[finished].double().mean()),
            "envs": count,  # the envs averaged over
        }

    def state_dict(self) -> Dict[str, torch.Tensor]:
        # a checkpoint holds no NaN: "no episode finished yet" is saved as a mask beside zeros
        state = {name: getattr(self, name).clone() for name in self._STATE}
        state["finished"] = ~torch.isnan(self.last_return)
        state["last_return"] = torch.nan_to_num(state["last_return"], nan=0.0)
        return state

    def load_state_dict(self, state: Dict[str, torch.Tensor]) -> None:
        for name in self._STATE:
            getattr(self, name).copy_(state[name])
        if "finished" in state:  # (older checkpoints kept the NaN itself)
            self.last_return[~state["finished"].to(self.device)] = math.nan

    _STATE = ("running_return", "running_length", "last_return", "last_length", "_sums")


class DivergenceLimit:
    """Stops a run whose simulations keep diverging (wrong scales, a too long timestep): every episode a diverged
    simulation ends is thrown away, so a run past the limit trains on what is left and its returns mean little.

    The share of diverged episodes (config max_diverged_fraction) is judged over windows of at least MIN_EPISODES
    ended episodes (one iteration when episodes are short, several when they are long), so a single early
    divergence does not stop a run. The window is not part of a checkpoint: a resumed run starts a new one."""

    MIN_EPISODES = 20

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
