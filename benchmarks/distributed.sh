#!/usr/bin/env bash
# 1 process vs 2 ranks (torchrun, gloo) on this machine, Ant on MuJoCo, 10 iterations each, diagnostics off:
#   A  1 process,  4096 envs, minibatch 32768             (65,536 env steps per iteration)
#   B  2 ranks x 2048 envs, minibatch 16384 per rank     (the same global batch and gradient steps as A)
#   C  2 ranks x 4096 envs, minibatch 32768 per rank     (twice the batch: what scaling out is for)
# Prints each run's median iteration time and env-steps/s from its metrics.jsonl.
#   bash benchmarks/distributed.sh [OUT]
set -euo pipefail
OUT=${1:-/tmp/isaac-ppo-distributed}
rm -rf "$OUT"
COMMON=(task=Ant sim=mujoco max_iterations=10 diagnostics=off save_interval_iterations=1000 runs_dir="$OUT")
isaac-ppo-train "${COMMON[@]}" num_envs=4096 experiment=A_1x4096
torchrun --standalone --nproc_per_node=2 -m isaac_ppo.train multi_gpu=true "${COMMON[@]}" num_envs=2048 \
  agent.minibatch_size=16384 experiment=B_2x2048
torchrun --standalone --nproc_per_node=2 -m isaac_ppo.train multi_gpu=true "${COMMON[@]}" num_envs=4096 \
  experiment=C_2x4096
python - "$OUT" <<'PY'
import glob, json, statistics, sys
for run in sorted(glob.glob(sys.argv[1] + "/*/*/metrics.jsonl")):
    rows = [json.loads(line) for line in open(run)][1:]  # the first iteration warms up
    it = statistics.median(r["iteration_s"] for r in rows)
    steps = rows[-1]["env_steps"] - rows[-2]["env_steps"]
    print(f"{run.split('/')[-3]:10s} env steps/iteration {steps:7d}  median iteration {it:6.2f} s  "
          f"collect {statistics.median(r['collect_s'] for r in rows):5.2f} s  "
          f"update {statistics.median(r['update_s'] for r in rows):5.2f} s  env-steps/s {steps / it:8.0f}")
PY
