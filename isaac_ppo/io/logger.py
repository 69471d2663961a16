"""A run directory's files: metrics.jsonl (one row per iteration, the same row for both agents),
TensorBoard scalars, metrics.json (summary), config.yaml, and the console progress line."""
from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import sys
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from isaac_ppo.errors import RunFailure

# what goes to TensorBoard, under which tag
TB_TAGS = {
    "window_mean_return": "train/return_window", "window_mean_length": "train/length_window",
    "batch_mean_return": "train/return_batch", "batch_mean_length": "train/length_batch", "episodes": "train/episodes",
    "actor_loss": "loss/actor", "critic_loss": "loss/critic", "entropy": "loss/entropy",
    "bounds_loss": "loss/bounds", "kl": "policy/kl", "clip_fraction": "policy/clip_fraction",
    "lr": "policy/lr", "fps_collect": "fps/collect", "fps_update": "fps/update", "fps": "fps/total",
    "num_envs": "plan/num_envs", "rollout_length": "plan/rollout_length", "batch_size": "plan/batch_size",
    "epochs": "plan/epochs", "staleness": "plan/staleness", "diverged": "env/diverged",
    "collect_s": "time/collect", "wait_s": "time/wait_for_batch", "update_s": "time/update",
    "iteration_s": "time/iteration", "advantage_std": "policy/advantage_std", "stale_kl": "policy/stale_kl",
    "stale_clip_fraction": "policy/stale_clip_fraction",
}

PACE_EVALUATIONS = 3  # the evaluations the progress line's "env steps to the next goal" is fitted through

# an evaluation's numbers in TensorBoard (eval/<key>, the task's measures too, e.g. eval/tracking_error_xy_mps, and
# eval/return_ci95_low and _high; eval_stochastic/ the same for the sampled actions, with eval.stochastic)
EVAL_TAGS = ("return_mean", "return_iqm", "length_mean", "episodes", "seconds")
EVAL_NOT_TAGS = ("env_steps", "policy_version", "wall_s", "diverged")  # (the step axis, clocks, a count)


def iteration_row(iteration: int, env_steps: int, wall_s: float, plan: Any, batch_size: int, staleness: int,
                  episodes: Mapping[str, Any], collect_s: float, update_s: float, iteration_s: float,
                  wait_s: Optional[float] = None) -> Dict[str, Any]:
    """One iteration's metrics.jsonl row (before the learner's losses and the diagnostics are added): the plan,
    the episodes that ended (and the window of the last ones), where the time went. `plan` has the Plan's fields."""
    row = {
        "iteration": iteration, "env_steps": env_steps, "wall_s": round(wall_s, 3),
        "num_envs": plan.num_envs, "rollout_length": plan.rollout_length, "batch_size": batch_size,
        "epochs": plan.epochs, "minibatch_size": plan.minibatch_size, "mode": plan.mode, "staleness": staleness,
        "episodes": episodes["episodes"], "batch_mean_return": episodes["batch_mean_return"],
        "batch_mean_length": episodes["batch_mean_length"], "window_episodes": episodes["window_episodes"],
        "window_mean_return": episodes["window_mean_return"], "window_mean_length": episodes["window_mean_length"],
        "diverged": episodes["diverged"],
        "collect_s": round(collect_s, 4), "update_s": round(update_s, 4), "iteration_s": round(iteration_s, 4),
        "fps_collect": batch_size / collect_s, "fps_update": batch_size / update_s, "fps": batch_size / iteration_s,
    }
    if wait_s is not None:  # the loop's own wait for its batch (rl-games does not report it)
        row["wait_s"] = round(wait_s, 4)
    if episodes["episodes"] and episodes.get("reward_terms"):  # each term's mean sum over those episodes
        row["reward_terms"] = dict(episodes["reward_terms"])
    if episodes.get("task_state"):  # the task's own state after the batch's last step (e.g. AnymalTerrain's level)
        row["task_state"] = dict(episodes["task_state"])
    return row


def write_config(run_dir: str, cfg: Any, resumed_from: Optional[str] = None) -> str:
    """config.yaml: the resolved config the run was started with; `resume` holds the checkpoint it continued
    from (resume=auto resolved), when it continued one."""
    from omegaconf import OmegaConf

    os.makedirs(run_dir, exist_ok=True)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    if resumed_from:
        resolved["resume"] = resumed_from
    path = os.path.join(run_dir, "config.yaml")
    with open(path, "w") as f:
        f.write(OmegaConf.to_yaml(resolved))
    return path


class RunLogger:
    def __init__(self, run_dir: str, task: str, max_iterations: Optional[int], quiet: bool = False,
                 max_env_steps: Optional[int] = None, videos: Optional[Any] = None, wandb: Optional[Any] = None,
                 thresholds: Tuple[float, ...] = ()):
        self.run_dir = run_dir
        self.thresholds = tuple(sorted(float(t) for t in thresholds))  # the task's solve thresholds (returns)
        self.wandb = wandb  # isaac_ppo.io.wandb_sink.WandbSink (wandb_activate=true): TensorBoard's scalars, or None
        self.videos = videos  # isaac_ppo.io.video.TrainingVideos (capture_video=true while training), or None
        self.task = task
        self.max_iterations = max_iterations
        self.max_env_steps = max_env_steps
        self.quiet = quiet  # no progress line (benchmarks)

    def begin(self, start_iteration: int = 0, start_env_steps: int = 0) -> "RunLogger":
        """Open the logs at the run's first iteration (a resumed run's: its checkpoint's)."""
        from isaac_ppo.io.events import EventWriter

        # resuming in the same directory (a requeued job): the rows and events after the checkpoint are redone
        self.writer = EventWriter(os.path.join(self.run_dir, "tb"), purge_step=start_env_steps or None)
        if self.wandb is not None:  # (starts the W&B run) every add_scalar below goes to W&B too
            self.writer = self.wandb.begin(self.writer)
        jsonl = os.path.join(self.run_dir, "metrics.jsonl")
        for tmp in glob.glob(os.path.join(self.run_dir, "*.tmp")):  # a rewrite a kill interrupted
            os.remove(tmp)
        _drop_rows_from(jsonl, start_iteration)
        self.evaluations = _evaluations(jsonl)  # (a run resumed in place: its evaluations before the resume)
        self.best_eval = max((value for _, value in self.evaluations), default=None)
        self.jsonl = open(jsonl, "a")
        self.tty = sys.stdout.isatty()
        self.started = time.time()
        self.start_iteration = start_iteration
        self.start_env_steps = start_env_steps
        self.last: Dict[str, Any] = {}
        self.fps_sum = 0.0
        self.diverged = 0  # episodes ended by a diverged simulation, in the iterations this process logged
        self.rows = 0
        return self

    def log(self, row: Mapping[str, Any]) -> None:
        """One iteration's row; NaN (no episode finished yet) is written as null. When a video is due, the policy
        is filmed first (its path goes in the row, its frames to TensorBoard)."""
        frames = None
        if self.videos is not None and self.videos.due(row["iteration"]):
            path, frames = self.videos.record(row["iteration"])
            row = dict(row, video=os.path.relpath(path, self.run_dir))
        with _writing("metrics.jsonl", self.run_dir):
            self.jsonl.write(json.dumps({k: _plain(v) for k, v in row.items()}) + "\n")
            self.jsonl.flush()
        step = row["env_steps"]
        with _writing("the TensorBoard events", self.run_dir):
            for key, tag in TB_TAGS.items():
                value = row.get(key)
                if isinstance(value, (int, float)) and value == value:
                    self.writer.add_scalar(tag, value, step)
            for key, value in row.get("diagnostics", {}).items():
                self.writer.add_scalar("diagnostics/" + key, value, step)
            for key, value in row.get("reward_terms", {}).items():  # legged_gym's and Isaac Lab's tags
                self.writer.add_scalar("episode/rew_" + key, value, step)
            for key, value in row.get("task_state", {}).items():  # (IsaacGymEnvs' Episode/terrain_level)
                self.writer.add_scalar("episode/" + key, value, step)
            evaluation = row.get("eval", {})
            self._evaluation("eval/", evaluation, step)
            self._evaluation("eval_stochastic/", evaluation.get("stochastic", {}), step)
            if frames:
                from isaac_ppo.io.video import tensorboard_video

                summary = tensorboard_video("video/env0", frames, fps=1.0 / self.videos.env.dt)
                self.writer.add_summary(summary, step)
            self.writer.flush()  # (each iteration's events readable at once)
        if self.wandb is not None:  # the row's scalars (and its video) as one W&B step
            self.wandb.flush(os.path.join(self.run_dir, row["video"]) if row.get("video") else None)
        self.last = row
        self.fps_sum += row["fps"]
        self.diverged += row["diverged"]
        self.rows += 1
        if not self.quiet:
            self._progress(row)

    def _evaluation(self, prefix: str, evaluation: Mapping[str, Any], step: int) -> None:
        for key, value in evaluation.items():  # (the tags, then the task's measures: any other number but the clocks)
            if key in EVAL_TAGS or (key not in EVAL_NOT_TAGS and isinstance(value, (int, float))
                                    and not isinstance(value, bool)):
                self.writer.add_scalar(prefix + key, value, step)
        if "return_ci95" in evaluation:
            low, high = evaluation["return_ci95"]
            self.writer.add_scalar(prefix + "return_ci95_low", low, step)
            self.writer.add_scalar(prefix + "return_ci95_high", high, step)

    def _standing(self, evaluation_return: float, env_steps: Optional[int] = None) -> str:
        """Where a run stands after an evaluation: the best so far, and the task's next goal (solve threshold) not
        yet reached with the env steps to it at the recent pace, for a user waiting on a CPU."""
        if env_steps is not None:
            self.evaluations.append((env_steps, evaluation_return))
        if self.best_eval is None or evaluation_return > self.best_eval:
            self.best_eval = evaluation_return
        ahead = [t for t in self.thresholds if t > self.best_eval]
        goal = f"next goal {ahead[0]:g}" if ahead else ("every goal reached" if self.thresholds else "")
        to_go = _steps_to(ahead[0], self.evaluations[-PACE_EVALUATIONS:]) if ahead else None
        if to_go is not None:
            goal += f" in ~{_steps(to_go)} env steps at the recent pace"
        return f"best {self.best_eval:.2f}" + (f", {goal}" if goal else "")

    def _progress(self, row: Mapping[str, Any]) -> None:
        done = row["iteration"] + 1
        elapsed = time.time() - self.started
        fraction = self._fraction(done, row["env_steps"])
        eta = elapsed * (1.0 - fraction) / fraction if fraction > 0 else 0.0
        total = f"/{self.max_iterations}" if self.max_iterations else ""
        budget = f"/{self.max_env_steps:,}" if self.max_env_steps else ""
        line = (
            f"[{self.task}] iter {done}{total} | steps {row['env_steps']:,}{budget} | "
            f"{row['fps']:,.0f} steps/s | train return {_shown(row['window_mean_return'], '.2f')} | "
            f"length {_shown(row['window_mean_length'], '.0f')} | "
            f"ETA {_clock(eta)}"
        )
        if row["diverged"]:  # episodes a diverged simulation ended (thrown away): never silent
            line += f" | diverged {row['diverged']:,}"
        for key, value in row.get("task_state", {}).items():
            line += f" | {key.replace('_', ' ')} {value:.2f}"
        if "eval" in row:
            evaluated = row["eval"]["return_mean"]
            line += f" | eval return {evaluated:.2f} ({self._standing(evaluated, row['env_steps'])})"
        for event in row.get("scheduler_events", ()):  # plan changes, with their reasons
            sys.stdout.write(("\n" if self.tty else "") + f"[{self.task}] scheduler: {event}\n")
        if self.tty:
            sys.stdout.write("\r" + line.ljust(110))
        else:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def _fraction(self, done: int, env_steps: int) -> float:
        """The share of this process's part of the run that is done: iterations or env steps, the nearer."""
        parts = []
        if self.max_iterations and self.max_iterations > self.start_iteration:
            parts.append((done - self.start_iteration) / (self.max_iterations - self.start_iteration))
        if self.max_env_steps and self.max_env_steps > self.start_env_steps:
            parts.append((env_steps - self.start_env_steps) / (self.max_env_steps - self.start_env_steps))
        return min(max(parts), 1.0) if parts else 0.0

    def summary(self, extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Write metrics.json (atomically) and return it."""
        summary = {
            "task": self.task,
            "iterations": self.last.get("iteration", -1) + 1,
            "env_steps": self.last.get("env_steps", 0),
            "wall_s": self.last.get("wall_s", 0.0),
            # the training return of the last iteration: lagged (see the README); final_eval is the one to compare
            "final_window_mean_return": self.last.get("window_mean_return"),
            "mean_fps": self.fps_sum / self.rows if self.rows else None,
            "diverged": self.diverged,
        }
        summary.update(extra or {})
        path = os.path.join(self.run_dir, "metrics.json")
        with _writing("metrics.json", self.run_dir):
            with open(path + ".tmp", "w") as f:
                json.dump({k: _plain(v) for k, v in summary.items()}, f, indent=2)
            os.replace(path + ".tmp", path)
        if self.wandb is not None:
            self.wandb.summarize(summary)
        return summary

    def close(self) -> None:
        if self.tty and self.last:
            sys.stdout.write("\n")
        if self.wandb is not None:
            self.wandb.finish()
        try:
            self.writer.close()
            self.jsonl.close()
        except OSError:  # (closing after a failed write: the failure itself was already raised)
            pass


@contextlib.contextmanager
def _writing(what: str, run_dir: str) -> Iterator[None]:
    """A failed write (no space left, a file size limit) as one RunFailure naming the file and the cause."""
    try:
        yield
    except OSError as error:
        raise RunFailure(f"cannot write {what} in {run_dir}: {error.strerror or error}") from None


def _drop_rows_from(path: str, iteration: int) -> None:
    """Keep the rows of iterations before `iteration` (atomically): a run stopped without warning after its last
    checkpoint logged iterations that the resumed run logs again. A torn line (what a full disk or a crash
    leaves mid-write) is dropped with them."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        lines = f.readlines()
    kept = [line for line in lines if _row_before(line, iteration)]
    if len(kept) == len(lines):
        return
    with open(path + ".tmp", "w") as f:
        f.writelines(kept)
    os.replace(path + ".tmp", path)


def _row_before(line: str, iteration: int) -> bool:
    if not line.endswith("\n"):
        return False  # torn: the row was never finished
    try:
        return json.loads(line).get("iteration", -1) < iteration
    except ValueError:
        return False


def _plain(value: Any) -> Any:
    """JSON has no NaN: null instead, in nested dicts and lists too (an evaluation whose every episode diverged)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _shown(value: Optional[float], spec: str) -> str:
    """A window statistic for the progress line: '-' until an episode has ended (the window is empty: NaN in
    the row, null in metrics.jsonl), not 'nan'."""
    return "-" if value is None or not math.isfinite(value) else format(value, spec)


def _evaluations(jsonl: str) -> List[Tuple[int, float]]:
    """(env steps, evaluation return) of every evaluation among a metrics.jsonl's rows."""
    found: List[Tuple[int, float]] = []
    if os.path.isfile(jsonl):
        with open(jsonl) as rows:
            for line in rows:
                row = json.loads(line)
                value = (row.get("eval") or {}).get("return_mean")
                if value is not None:
                    found.append((row["env_steps"], value))
    return found


def _steps_to(goal: float, evaluations: Sequence[Tuple[int, float]]) -> Optional[float]:
    """Env steps from the last evaluation to where the least-squares line through these evaluations reaches goal;
    None with fewer than two, a line that does not rise, or a goal the line already passed (a dip, not a pace)."""
    if len(evaluations) < 2:
        return None
    xs = [float(x) for x, _ in evaluations]
    ys = [float(y) for _, y in evaluations]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    if not slope > 0:
        return None
    to_go = mx + (goal - my) / slope - xs[-1]
    return to_go if to_go > 0 else None


def _steps(count: float) -> str:
    """1.2M, 350k, 900: env steps as a user reads them."""
    if count >= 1e6:
        return f"{count / 1e6:.1f}M"
    return f"{count / 1e3:.0f}k" if count >= 1e3 else f"{count:.0f}"


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
