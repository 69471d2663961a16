"""Is a trained locomotion policy moving, or exploiting the simulator? Replays a checkpoint's deterministic policy
and measures the torso's speed: the observation's local linear velocity (Ant's and Humanoid's observations 1-3,
IsaacGymEnvs' order), the quantity their progress reward pays for a step.

A walking Ant of the MuJoCo port moves at ~7 m/s (its reward ~8 a step). Issue 21's study found a policy at a
median 43 m/s: it had learned to exploit the Euler integrator's error, and its return (25,762) measured that, not a
gait; one trained under MuJoCo's implicit integrator found implicit's (39 m/s) (benchmarks/history/studies.md, "The
paper's question on Ant"). The port now integrates with RK4 (tasks/locomotion/assets/ant.xml), under which the same
configuration walks at a speed that holds at finer steps (refine=).
Beside the speed, the posture: the 5% and 50% quantiles of the torso's up axis on the world's (1 upright) and the
median torso height. Under RK4 a policy can still run far past its peers at a speed that holds at finer steps
(issue 21, PROTOCOL amendment 9: a tumbling, bounding motion, not integration error); the posture says how it moves.
Every study run of a task with a gait (its spec's) gets this check on its last checkpoint (isaac-ppo-study writes it
into study_done.json and the report lists it), so a return that runs away from the gait behind it is seen.
benchmarks/gait_check.py runs it on any checkpoint.

A legged robot under velocity commands (Anymal) is paid for tracking its command, not for speed: its gait is
measured by its base's speed over the ground, its velocity-tracking errors (the task's measures, m/s and rad/s),
its reward a step and the share of envs that fell (issue 45 deliver 4: the speed and the tracking error must hold
at 2x and 4x finer physics steps). BallBalance is measured by where its ball is kept and how still, its reward a
step and the envs that dropped the ball; FrankaCabinet by the share of envs that opened the drawer, its mean
opening, the grasp point's distance to the handle and its reward a step; ShadowHand by the goals reached, the envs
that dropped the block, the rotation distance to the goal and its reward a step. A task of one's own is measured
by the means of the step measures its spec names (Gait("measures", (...))). Which gait a task gets is its spec's
(envs/registry.py): GAITS maps each kind to what measures it.
"""
from __future__ import annotations

import os
import statistics
from typing import Any, Dict, List, Optional, Tuple

import torch

from isaac_ppo.envs import registry

TORSO_HEIGHT = 0  # IsaacGymEnvs' locomotion observations: the torso's height above the floor,
TORSO_VELOCITY = slice(1, 4)  # its linear velocity in its own frame,
UP_PROJ = 10  # and its up axis projected on the world's (1 upright, 0 on its side, below 0 upside down)


class LocomotionGait:
    """A torso_speed gait (Ant's and Humanoid's, whose observations 1-3 are the torso's local linear velocity): how
    fast the torso moves (the quantity their progress reward pays for) and how
    (its posture)."""

    def __init__(self) -> None:
        self.speeds: List[torch.Tensor] = []
        self.forward: List[torch.Tensor] = []
        self.rewards: List[torch.Tensor] = []
        self.heights: List[torch.Tensor] = []
        self.ups: List[torch.Tensor] = []
        self.diverged = 0

    def observe(self, env: Any, obs: torch.Tensor, reward: torch.Tensor, resets: torch.Tensor,
                extras: Dict[str, Any]) -> None:
        self.speeds.append(obs[:, TORSO_VELOCITY].norm(dim=1))
        self.forward.append(env.qvel[:, 0].float())  # the root's world x velocity: toward the target, 1 km ahead
        self.heights.append(obs[:, TORSO_HEIGHT])
        self.ups.append(obs[:, UP_PROJ])
        self.rewards.append(reward)
        self.diverged += int(extras.get("diverged", 0))

    def summary(self) -> Dict[str, Any]:
        speed = torch.stack(self.speeds).flatten()
        rewards = torch.stack(self.rewards)
        return {"torso_speed_p50_p90_p99": _quantiles(speed, 0.5, 0.9, 0.99),
                "torso_speed_max": round(float(speed.max()), 1),
                "reward_per_step_median": round(float(rewards.median()), 2), "diverged": self.diverged,
                # what the progress reward pays for, averaged (a bounding gait's speeds are bimodal: its median jumps)
                "forward_speed_mean": round(float(torch.stack(self.forward).mean()), 2),
                "reward_per_step_mean": round(float(rewards.mean()), 2),
                # How it moves, beside how fast: a walker keeps its torso upright (up_proj ~1 at every step); a
                # policy that tumbles or bounds spends steps on its side or upside down (a low 5% quantile).
                "up_proj_p5_p50": _quantiles(torch.stack(self.ups).flatten(), 0.05, 0.5),
                "torso_height_p50": _quantiles(torch.stack(self.heights).flatten(), 0.5)[0]}


class LeggedGait:
    """A legged robot's gait under velocity commands (IsaacGymEnvs' Anymal): how fast its base moves over the
    ground (world frame, qvel), how far that is from its command (the task's own measures, in the base frame the
    reward uses), what it is paid a step, and how often a fall (a terminal contact: the legged tasks' only terminal
    state) ends an episode. Steps of a diverged simulation enter no mean."""

    def __init__(self) -> None:
        self.planar_speeds: List[torch.Tensor] = []
        self.tracking_xy: List[torch.Tensor] = []
        self.tracking_yaw: List[torch.Tensor] = []
        self.rewards: List[torch.Tensor] = []
        self.fell: Optional[torch.Tensor] = None  # per env: has an episode of it ended by a terminal contact
        self.diverged = 0

    def observe(self, env: Any, obs: torch.Tensor, reward: torch.Tensor, resets: torch.Tensor,
                extras: Dict[str, Any]) -> None:
        diverged = extras.get("diverged_envs", torch.zeros_like(resets)).bool()
        kept = ~diverged
        self.planar_speeds.append(env.qvel[:, 0:2].float().norm(dim=1)[kept.to(env.qvel.device)].cpu())
        measures = extras["measures"]
        self.tracking_xy.append(measures["tracking_error_xy_mps"][kept])
        self.tracking_yaw.append(measures["yaw_rate_error_radps"][kept])
        self.rewards.append(reward[kept])
        terminal = resets.bool() & ~extras["time_outs"].bool() & ~diverged
        self.fell = terminal if self.fell is None else self.fell | terminal
        self.diverged += int(extras.get("diverged", 0))

    def summary(self) -> Dict[str, Any]:
        speed = torch.cat(self.planar_speeds)
        return {"base_planar_speed_p50_p90_p99": _quantiles(speed, 0.5, 0.9, 0.99),
                "base_planar_speed_mean": round(float(speed.mean()), 3),
                "tracking_error_xy_mps_mean": round(float(torch.cat(self.tracking_xy).mean()), 3),
                "yaw_rate_error_radps_mean": round(float(torch.cat(self.tracking_yaw).mean()), 3),
                "reward_per_step_mean": round(float(torch.cat(self.rewards).mean()), 4),
                "terminal_contact_env_fraction": round(float(self.fell.float().mean()), 3),
                "diverged": self.diverged}


class MeasuredGait:
    """A gait measured by the task's own step measures (extras["measures"], MEASURES of them), the reward a step and
    one flag per env that an episode's end raises (flag(): by default a terminal end). Steps of a diverged
    simulation enter no mean and raise no flag."""

    MEASURES: Tuple[str, ...] = ()

    def __init__(self) -> None:
        self.values: Dict[str, List[torch.Tensor]] = {name: [] for name in self.MEASURES}
        self.rewards: List[torch.Tensor] = []
        self.flagged: Optional[torch.Tensor] = None
        self.diverged = 0

    def flag(self, resets: torch.Tensor, extras: Dict[str, Any], kept: torch.Tensor) -> torch.Tensor:
        return resets.bool() & ~extras["time_outs"].bool() & kept

    def observe(self, env: Any, obs: torch.Tensor, reward: torch.Tensor, resets: torch.Tensor,
                extras: Dict[str, Any]) -> None:
        kept = ~extras.get("diverged_envs", torch.zeros_like(resets)).bool()
        for name in self.MEASURES:
            self.values[name].append(extras["measures"][name][kept])
        self.rewards.append(reward[kept])
        raised = self.flag(resets, extras, kept)
        self.flagged = raised if self.flagged is None else self.flagged | raised
        self.diverged += int(extras.get("diverged", 0))

    def measured(self, name: str) -> torch.Tensor:
        return torch.cat(self.values[name])

    def common(self) -> Dict[str, Any]:
        return {"reward_per_step_mean": round(float(torch.cat(self.rewards).mean()), 4), "diverged": self.diverged}


class BalanceGait(MeasuredGait):
    """BallBalance's: where the ball is kept and how still (the task's measures: its distance from the target point,
    m, and its speed, m/s, the two factors of the reward), the reward a step, and the share of envs that dropped the
    ball (its only terminal state). An exploit of the tray's drives or the feet's constraints would hold the ball by
    physics that finer steps do not reproduce."""

    MEASURES = ("ball_distance_m", "ball_speed_mps")

    def summary(self) -> Dict[str, Any]:
        distance = self.measured("ball_distance_m")
        return {"ball_distance_m_p50_p90": _quantiles(distance, 0.5, 0.9),
                "ball_distance_m_mean": round(float(distance.mean()), 3),
                "ball_speed_mps_mean": round(float(self.measured("ball_speed_mps").mean()), 3),
                "dropped_env_fraction": round(float(self.flagged.float().mean()), 3), **self.common()}


class CabinetGait(MeasuredGait):
    """FrankaCabinet's: how the drawer is opened (the share of envs that opened it past 0.39 m, the task's success
    and only terminal state, and the drawer's mean opening, m), how close the grasp point stays to the handle (m),
    and the reward a step. An exploit of the fingers' drives or contacts would pull the drawer by physics that finer
    steps do not reproduce."""

    MEASURES = ("drawer_opening_m", "grasp_distance_m")

    def flag(self, resets: torch.Tensor, extras: Dict[str, Any], kept: torch.Tensor) -> torch.Tensor:
        return extras["outcomes"]["drawer_opened"].bool() & kept

    def summary(self) -> Dict[str, Any]:
        return {"opened_env_fraction": round(float(self.flagged.float().mean()), 3),
                "drawer_opening_m_mean": round(float(self.measured("drawer_opening_m").mean()), 3),
                "grasp_distance_m_mean": round(float(self.measured("grasp_distance_m").mean()), 3), **self.common()}


class HandGait(MeasuredGait):
    """ShadowHand's: the goals reached (successes per env over the replay, the task's measure of progress), the
    share of envs that dropped the block (its terminal state), the mean rotation distance to the goal (rad) and the
    reward a step. An exploit of the fingers' drives or contacts would turn the block by physics that finer steps do
    not reproduce."""

    MEASURES = ("rotation_distance_rad",)

    def __init__(self) -> None:
        super().__init__()
        self.successes: Optional[torch.Tensor] = None

    def observe(self, env: Any, obs: torch.Tensor, reward: torch.Tensor, resets: torch.Tensor,
                extras: Dict[str, Any]) -> None:
        super().observe(env, obs, reward, resets, extras)
        kept = ~extras.get("diverged_envs", torch.zeros_like(resets)).bool()
        reached = ((extras["reward_terms"]["success_bonus"] > 0) & kept).float()
        self.successes = reached if self.successes is None else self.successes + reached

    def summary(self) -> Dict[str, Any]:
        return {"successes_per_env_mean": round(float(self.successes.mean()), 3),
                "dropped_env_fraction": round(float(self.flagged.float().mean()), 3),
                "rotation_distance_rad_mean": round(float(self.measured("rotation_distance_rad").mean()), 3),
                **self.common()}


class MeansGait(MeasuredGait):
    """A task of one's own: the mean of each step measure its spec's Gait names, the share of envs an episode of
    which ended terminally, and the reward a step."""

    def __init__(self, measures: Tuple[str, ...]) -> None:
        self.MEASURES = tuple(measures)
        super().__init__()

    def summary(self) -> Dict[str, Any]:
        means = {f"{name}_mean": round(float(self.measured(name).mean()), 4) for name in self.MEASURES}
        return dict(means, terminal_env_fraction=round(float(self.flagged.float().mean()), 3), **self.common())


# what each kind of gait (a task spec's Gait.kind) is measured by
GAITS = {"torso_speed": LocomotionGait, "velocity_tracking": LeggedGait, "ball": BalanceGait, "drawer": CabinetGait,
         "block": HandGait, "measures": MeansGait}


def gait_of(task: Any) -> Optional[registry.Gait]:
    """The gait a task is checked by (its spec's), from its name or its task node; None when it has none."""
    spec = registry.spec_of_node(task if isinstance(task, dict) else {"name": task})
    return None if spec is None else spec.gait


def tasks_with_gaits() -> List[str]:
    """The registered tasks that have a gait check."""
    return [name for name, spec in registry.specs().items() if spec.gait is not None]


def _measure(gait: registry.Gait) -> Any:
    return MeansGait(gait.measures) if gait.kind == "measures" else GAITS[gait.kind]()


def check(path: str, task: str = "Ant", envs: int = 64, steps: int = 1000, seed: int = 0,
          integrator: Optional[str] = None, refine: int = 1,
          physics: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Replay checkpoint path (its run's config.yaml beside checkpoints/ when there is one, else the defaults) on
    envs MuJoCo envs for steps control steps, measured by the task's gait (GAITS): for Ant and Humanoid torso
    speed quantiles, forward speed, reward a step, posture; for Anymal base speed over the ground, velocity-tracking
    errors, reward a step, the envs that fell; for both the simulations that diverged.
    integrator (task.mujoco.integrator) and refine (refine x finer physics steps, refine x as many a control step:
    the same control step) replay it under other physics: an exploit of integration error slows as refine grows, a
    gait does not. physics (task.mujoco keys: timestep, substeps, integrator) replaces the run's before refine
    divides it. A task whose floor is declared (task.mujoco.contact_timeconst) keeps it under refinement."""
    from omegaconf import OmegaConf

    from isaac_ppo.envs.make import make
    from isaac_ppo.loop.evaluate import mean_action
    from isaac_ppo.loop.play import load_checkpoint_model, run_config
    from isaac_ppo.config.compose import compose_config

    saved = run_config(path)
    if saved:
        cfg = OmegaConf.load(saved)
    else:
        cfg = compose_config([f"task={task}", "sim=mujoco", "test=true", f"checkpoint={path}"])
    task_cfg = OmegaConf.to_container(cfg.task, resolve=True)
    kind = gait_of(task_cfg)
    if kind is None:
        raise ValueError(f"gait check: {task} has none (tasks with one: {', '.join(tasks_with_gaits())})")
    task_cfg["mujoco"].update(physics or {})
    task_cfg["mujoco"].update(timestep=task_cfg["mujoco"]["timestep"] / refine,
                              substeps=task_cfg["mujoco"]["substeps"] * refine)
    if integrator:
        task_cfg["mujoco"]["integrator"] = integrator
    env = make(task, envs, sim="mujoco", seed=seed, task_cfg=task_cfg)
    policy = mean_action(load_checkpoint_model(cfg, env, path))
    gait = _measure(kind)
    obs = env.reset()["obs"]
    with torch.no_grad():
        for _ in range(steps):
            out, reward, resets, extras = env.step(policy(obs))
            policy.episodes_ended(resets)
            obs = out["obs"]
            gait.observe(env, obs, reward, resets, extras)
    return dict({"checkpoint": path, "task": task, "envs": envs, "steps": steps}, **gait.summary())


def _quantiles(values: torch.Tensor, *levels: float) -> List[float]:
    return [round(float(q), 2) for q in torch.quantile(values, torch.tensor(levels))]


GAIT_FLAG = 1.5  # a run whose median speed is past this multiple of the study's median run is flagged
# ... and past this floor, m/s: near zero a multiple means nothing (the quantiles are rounded to 0.01 m/s, so in a
# study of robots that stand, median 0.01, one at 0.02 would be "past 1.5x"); a robot slower than this stands and
# cannot owe its return to speed the simulator gave it
GAIT_FLAG_FLOOR_MPS = 0.1
# the speed a study flags by (its median, the first of the quantiles): the torso's (Ant, Humanoid), the base's over
# the ground (Anymal); a task without one (BallBalance, FrankaCabinet, ShadowHand) is tabled, not flagged
SPEEDS = ("torso_speed_p50_p90_p99", "base_planar_speed_p50_p90_p99")


def _speed(gait: Dict[str, Any]) -> Optional[float]:
    return next((gait[key][0] for key in SPEEDS if key in gait), None)


def flagged(checked: Dict[str, Dict[str, Any]]) -> List[str]:
    """The runs (keys of checked) whose median speed is past GAIT_FLAG x the median run's and past
    GAIT_FLAG_FLOOR_MPS."""
    speeds = {run: _speed(g) for run, g in checked.items()}
    speeds = {run: v for run, v in speeds.items() if v is not None}
    if not speeds:
        return []
    median = statistics.median(speeds.values())
    return [run for run, v in speeds.items() if v > GAIT_FLAG * median and v > GAIT_FLAG_FLOOR_MPS]


def write_table(records: Dict[str, Dict[str, Any]], checked: Dict[str, Dict[str, Any]], out: str) -> str:
    """gait.md: every checked run's gait (its last policy replayed), the runs past GAIT_FLAG x the median speed
    flagged: a return far above its peers' that a far faster robot earned is the simulator's, not a gait's.
    Ant and Humanoid: the torso's speed and posture; other tasks: every measure of their gait (GAITS)."""
    if any("torso_speed_p50_p90_p99" not in g for g in checked.values()):
        return _write_measures_table(records, checked, out)
    median = statistics.median(_speed(g) for g in checked.values())  # (every run here has a torso speed)
    past = flagged(checked)
    replay = next(iter(checked.values()))  # (every run is replayed alike)
    lines = [f"# Gait check: each run's last policy replayed ({replay['envs']} envs x {replay['steps']} steps, "
             "isaac_ppo/lab/gait.py)\n",
             f"Median torso speed over runs: {median:.2f} m/s; flagged: a run past {GAIT_FLAG:g}x that "
             f"(and past {GAIT_FLAG_FLOOR_MPS:g} m/s).\n",
             "| arm | seed | torso speed p50 / p90 / p99, m/s | max | reward a step (median) | diverged | "
             "up axis on z p5 / p50 (1 upright) | torso height p50, m | flag |",
             "|---|---|---|---|---|---|---|---|---|"]
    for folder, g in sorted(checked.items(), key=lambda item: (records[item[0]]["arm"], records[item[0]]["seed"])):
        p50, p90, p99 = g["torso_speed_p50_p90_p99"]
        flag = "**flagged**" if folder in past else ""
        # (runs checked before the posture was measured have none: "-")
        up = " / ".join(f"{u:.2f}" for u in g["up_proj_p5_p50"]) if "up_proj_p5_p50" in g else "-"
        height = f"{g['torso_height_p50']:.2f}" if "torso_height_p50" in g else "-"
        lines.append(f"| {records[folder]['arm']} | {records[folder]['seed']} | {p50:.2f} / {p90:.2f} / {p99:.2f} | "
                     f"{g['torso_speed_max']:.1f} | {g['reward_per_step_median']:.2f} | {g['diverged']} | {up} | "
                     f"{height} | {flag} |")
    path = os.path.join(out, "gait.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _write_measures_table(records: Dict[str, Dict[str, Any]], checked: Dict[str, Dict[str, Any]], out: str) -> str:
    """gait.md for a task measured otherwise than by its torso (Anymal, BallBalance, FrankaCabinet, ShadowHand): one
    column per measure."""
    past = set(flagged(checked))
    replay = next(iter(checked.values()))
    measures = [k for k in replay if k not in ("task", "envs", "steps", "checkpoint")]

    def cell(value: Any) -> str:
        return " / ".join(f"{v:g}" for v in value) if isinstance(value, list) else f"{value:g}"

    lines = [f"# Gait check: each run's last policy replayed ({replay['envs']} envs x {replay['steps']} steps, "
             "isaac_ppo/lab/gait.py)\n",
             (f"Flagged: a run whose median speed is past {GAIT_FLAG:g}x the median run's and past "
              f"{GAIT_FLAG_FLOOR_MPS:g} m/s.\n" if _speed(replay) is not
              None else "No speed to flag by: the measures alone.\n"),
             "| arm | seed | " + " | ".join(measures) + " | flag |", "|---|---|" + "---|" * len(measures) + "---|"]
    for folder, g in sorted(checked.items(), key=lambda item: (records[item[0]]["arm"], records[item[0]]["seed"])):
        flag = "**flagged**" if folder in past else ""
        lines.append(f"| {records[folder]['arm']} | {records[folder]['seed']} | "
                     + " | ".join(cell(g.get(k, float("nan"))) for k in measures) + f" | {flag} |")
    path = os.path.join(out, "gait.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
