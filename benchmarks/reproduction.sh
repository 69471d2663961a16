#!/usr/bin/env bash
# A reduced reproduction of arXiv 2506.03404's claim 1 (fixed batch, few envs x long rollouts vs many envs x short
# rollouts) and claim 3 (the diagnostics' trends) on this machine: Cartpole at its full default budget, Ant at 80 of
# its 500 iterations, 3 splits x 3 seeds each, then isaac-ppo-report over both sweeps.
#   bash benchmarks/reproduction.sh [OUT]        (OUT defaults to /tmp/isaac-ppo-repro; about 1 h on 2 cores)
set -euo pipefail
OUT=${1:-/tmp/isaac-ppo-repro}
HERE=$(cd "$(dirname "$0")" && pwd)

# Cartpole: B = 512 x 16 = 8192, budget 100 iterations (819,200 env steps): 32 x 256, 128 x 64, 512 x 16
isaac-ppo-train -m preset=fixed_batch_splits task=Cartpole sim=mujoco seed=0,1,2 scheduler.num_envs=32,128,512 \
  hydra.sweep.dir="$OUT/cartpole"
# Ant: B = 4096 x 16 = 65536, 80 iterations (5,242,880 env steps): 256 x 256, 1024 x 64, 4096 x 16
isaac-ppo-train -m preset=fixed_batch_splits task=Ant sim=mujoco seed=0,1,2 scheduler.num_envs=256,1024,4096 \
  max_env_steps=5242880 hydra.sweep.dir="$OUT/ant"

isaac-ppo-report "$OUT/cartpole" --out "$HERE/reproduction/cartpole"
isaac-ppo-report "$OUT/ant" --out "$HERE/reproduction/ant"
