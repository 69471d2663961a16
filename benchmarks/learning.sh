#!/usr/bin/env bash
# Learning benchmarks of the training issue: Ant at 4096 envs for 500 iterations (the IsaacGymEnvs budget),
# seeds 0 1 2, one after the other (2 cores: parallel runs would only share them). Then plot the curves:
#   python benchmarks/plot_curves.py OUT.png RUN_DIR...
# Usage: bash benchmarks/learning.sh [RUNS_DIR]   (default /tmp/isaac-ppo-bench-runs)
set -euo pipefail
runs="${1:-/tmp/isaac-ppo-bench-runs}"
for seed in 0 1 2; do
  isaac-ppo-train task=Ant sim=mujoco seed=$seed max_iterations=500 experiment=ant_seed$seed runs_dir="$runs"
done
