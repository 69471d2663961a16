"""Why FrankaCabinet's policies leave the drawer short of 0.39 m: the same task with its terminal line removed.

IsaacGymEnvs ends a FrankaCabinet episode when the drawer is open past 0.39 m, and pays for an open drawer every
step; a return-maximising policy may then stop short of the line (benchmarks/history/franka-cabinet.md,
"FrankaCabinet under the fixed learner"). Train the task with that one line removed, the key
env.openEndsEpisode=false (the drawer past 0.39 m still pays IsaacGymEnvs' bonus and still counts as drawer_opened
at an episode's end, but the episode runs to its
time-out; the run's evaluations stay on the task proper, cfg/task/FrankaCabinet.yaml's eval_env), and replay its
checkpoints here on the task proper (terminal past 0.39 m) to see how they cross it:

  isaac-ppo-train task=FrankaCabinet task.env.openEndsEpisode=false task.env.numProps=0 num_envs=1024 seed=0 ...
  python benchmarks/franka_terminal_line.py replay RUN/checkpoints/last.pt [...]

(Until 2026-12-02 this script's own `train` patched the task's reward function to the same effect; the key gives
the same run bit for bit: 3 iterations of seed 3, every loss equal.)

replay: 64 envs, one episode each from reset (seed 7), the mean action, on the task proper; per checkpoint one JSON
line: the share of envs whose first episode crossed 0.39 m, the peak opening of each first episode (10/50/90%), the
share of its steps with the drawer past 0.3 m, its mean length; and the peak speeds of the drawer (m/s) and of the
fastest of arm joints 1-7 (rad/s) in each first episode (10/50/90%), against the URDF's velocity limits (drawer
1 m/s; joints 1-4 2.175 rad/s, 5-7 2.61 rad/s), which the port holds only with task.mujoco.velocity_limits=true
(docs/tasks/manipulation.md, FrankaCabinet).
"""
from __future__ import annotations

import json
import sys

import torch

REPLAY_ENVS, REPLAY_STEPS, REPLAY_SEED = 64, 500, 7
ARM_VELOCITIES, DRAWER_VELOCITY = slice(9, 16), 22  # obs: joints 1-7's velocities x dofVelocityScale; the drawer's


def replay(path: str) -> dict:
    from omegaconf import OmegaConf

    from isaac_ppo.envs.make import make
    from isaac_ppo.loop.evaluate import mean_action
    from isaac_ppo.loop.play import load_checkpoint_model, run_config

    cfg = OmegaConf.load(run_config(path))
    task_cfg = OmegaConf.to_container(cfg.task, resolve=True)
    task_cfg["env"]["openEndsEpisode"] = True  # (the task proper, whatever the run trained under)
    env = make("FrankaCabinet", REPLAY_ENVS, sim="mujoco", seed=REPLAY_SEED, task_cfg=task_cfg)
    policy = mean_action(load_checkpoint_model(cfg, env, path))
    obs = env.reset()["obs"]
    live = torch.ones(REPLAY_ENVS, dtype=torch.bool)  # still in its first episode
    peak, length, past = torch.zeros(REPLAY_ENVS), torch.zeros(REPLAY_ENVS), torch.zeros(REPLAY_ENVS)
    crossed = torch.zeros(REPLAY_ENVS, dtype=torch.bool)
    drawer_speed, arm_speed = torch.zeros(REPLAY_ENVS), torch.zeros(REPLAY_ENVS)
    velocity_scale = float(task_cfg["env"]["dofVelocityScale"])
    with torch.no_grad():
        for _ in range(REPLAY_STEPS):
            out, _, resets, extras = env.step(policy(obs))
            obs = out["obs"]
            seen = extras.get("final_obs", obs).float().cpu()  # (the step's observation, before any reset)
            drawer_speed = torch.where(live, torch.maximum(drawer_speed, seen[:, DRAWER_VELOCITY].abs()), drawer_speed)
            arm = (seen[:, ARM_VELOCITIES].abs() / velocity_scale).max(dim=1).values
            arm_speed = torch.where(live, torch.maximum(arm_speed, arm), arm_speed)
            opening = extras["measures"]["drawer_opening_m"].float().cpu()  # (the step's, before any reset)
            peak = torch.where(live, torch.maximum(peak, opening), peak)
            past += (live & (opening > 0.3)).float()
            length += live.float()
            crossed |= live & (opening > 0.39)
            live &= ~resets.bool().cpu()
    def deciles(values: torch.Tensor) -> list:
        return [round(q, 3) for q in torch.quantile(values, torch.tensor([0.1, 0.5, 0.9])).tolist()]

    return {"checkpoint": path, "crossed_0.39_fraction": round(float(crossed.float().mean()), 3),
            "peak_opening_m_p10_p50_p90": deciles(peak),
            "peak_drawer_speed_mps_p10_p50_p90": deciles(drawer_speed),
            "peak_arm_joint_speed_radps_p10_p50_p90": deciles(arm_speed),
            "steps_past_0.3_fraction": round(float((past / length).mean()), 3),
            "episode_length_mean": round(float(length.mean()), 1)}


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "replay":
        sys.exit(__doc__)
    for checkpoint_path in sys.argv[2:]:
        print(json.dumps(replay(checkpoint_path)), flush=True)
