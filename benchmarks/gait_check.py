"""Is a trained Ant (or Humanoid) walking, or exploiting the simulator? isaac_ppo.lab.gait.check on checkpoints: one JSON
line each with the torso speed quantiles (50/90/99%) and max over every env and step, the median reward a step, the
simulations that diverged (stopped by the task's bounds) during the replay, and the posture (the torso's up axis on
the world's, 5% and 50% quantiles, 1 upright; the median torso height). A walking Ant of this port moves at
~7 m/s; see isaac_ppo/lab/gait.py. An Anymal (--task Anymal) gets its own measures: the base's speed over the ground
(50/90/99% and mean, m/s), its mean velocity-tracking errors (xy in m/s, yaw rate in rad/s, in the base frame as its
reward), the reward a step, the share of envs that fell (a terminal contact) and the diverged simulations. A
BallBalance (--task BallBalance): the ball's distance from its target point (50/90% and mean, m) and speed (mean,
m/s), the reward a step and the share of envs that dropped the ball.

  python benchmarks/gait_check.py runs/study/paper_ant/runs/*/seed_*/checkpoints/last.pt [--task Ant] [--envs 64]

Where does an exploit live? Replay the same policy under other physics: --integrator (euler, rk4, implicit,
implicitfast; default the model file's) and --refine K (K times finer physics steps, K times as many a control
step: the same control step, Ant's 1/60 s, Anymal's 20 ms, BallBalance's 10 ms). An exploit of integration error shrinks as K grows; a
walking gait does not.

  python benchmarks/gait_check.py RUN/checkpoints/last.pt --task Anymal --refine 2
"""
from __future__ import annotations

import argparse
import json

from isaac_ppo.envs.registry import INTEGRATORS
from isaac_ppo.lab.gait import check, tasks_with_gaits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--task", default="Ant", choices=tasks_with_gaits())
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--integrator", choices=INTEGRATORS)
    parser.add_argument("--refine", type=int, default=1)
    args = parser.parse_args()
    for path in args.checkpoints:
        result = check(path, args.task, args.envs, args.steps, args.seed, args.integrator, args.refine)
        result.update(integrator=args.integrator or "the run's (its config.yaml, else the model file's)",
                      refine=args.refine)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
