#!/usr/bin/env bash
# Learning benchmarks, 3 seeds (0 1 2) one after the other (2 cores: parallel runs would only share them).
#   Ant (the training issue): 4096 envs for 500 iterations (the IsaacGymEnvs budget). Plot the curves:
#     python benchmarks/plot_curves.py OUT.png RUN_DIR...
#   Anymal (issue 45 deliver 6): IsaacGymEnvs' values (cfg/task/Anymal.yaml, cfg/agent/AnymalPPO.yaml: 4096 envs x
#   24 steps, 1000 iterations = 98.3M env steps), evaluated every 2M env steps (the default) on 64 envs of their own,
#   each one episode from reset with commands drawn fresh from the evaluation's own seed stream: the evaluation
#   return (target >= 60 of 75) and the mean velocity-tracking error (eval.tracking_error_xy_mps, m/s; yaw rate
#   eval.yaw_rate_error_radps) against env steps and wall clock:
#     python benchmarks/plot_curves.py --eval anymal_learning.png RUNS/anymal_seed*/*/
#     isaac-ppo-report RUNS/anymal_seed*/*/ metric=eval.tracking_error_xy_mps
#   BallBalance (issue 47): IsaacGymEnvs' values (4096 envs x 16 steps, 250 iterations = 16.4M env steps), evaluated
#     every 2M env steps; solved at evaluation return 300 (of at most 500).
#   AnymalTerrain (issue 46): IsaacGymEnvs' values (4096 envs x 24 steps, AnymalTerrainPPO, 1500 iterations = 147M
#     env steps; resumable with resume=auto, so a CPU runs a fraction and continues), evaluated every 2M env steps on 64
#     envs spread over every level (eval_env: curriculum false); the curriculum's mean level is task_state.terrain_level:
#     isaac-ppo-report RUNS/anymal_terrain_seed*/*/ metric=task_state.terrain_level
#   and its figure (the evaluations, then the curriculum's mean level every iteration, against env steps and wall clock):
#     python benchmarks/plot_curves.py --eval anymal_terrain_learning.png RUNS/anymal_terrain_seed*/*/
# Usage: bash benchmarks/learning.sh [RUNS_DIR] [TASK] [SEEDS]   (SEEDS: "0 1 2" unless given)   (default /tmp/isaac-ppo-bench-runs, Ant)
set -euo pipefail
runs="${1:-/tmp/isaac-ppo-bench-runs}"
task="${2:-Ant}"
seeds="${3:-0 1 2}"
case "$task" in
  Ant) for seed in $seeds; do
         isaac-ppo-train task=Ant sim=mujoco seed=$seed max_iterations=500 experiment=ant_seed$seed runs_dir="$runs"
       done ;;
  Anymal) for seed in $seeds; do
            isaac-ppo-train task=Anymal sim=mujoco seed=$seed max_iterations=1000 experiment=anymal_seed$seed \
              runs_dir="$runs"
          done ;;
  BallBalance) for seed in $seeds; do
                 isaac-ppo-train task=BallBalance sim=mujoco seed=$seed max_iterations=250 \
                   experiment=ballbalance_seed$seed runs_dir="$runs"
               done ;;
  AnymalTerrain) for seed in $seeds; do
                   # (continues the seed's run where one stopped: resume=auto refuses when there is none yet)
                   resume=$(ls "$runs"/anymal_terrain_seed$seed/*/checkpoints/last.pt >/dev/null 2>&1 && echo resume=auto || true)
                   isaac-ppo-train task=AnymalTerrain sim=mujoco seed=$seed max_iterations=1500 \
                     experiment=anymal_terrain_seed$seed runs_dir="$runs" $resume
                 done ;;
  *) echo "learning.sh: no learning benchmark for task $task (Ant, Anymal, AnymalTerrain, BallBalance)" >&2; exit 2 ;;
esac
