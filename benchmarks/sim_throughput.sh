#!/usr/bin/env bash
# Simulator throughput at 4096 envs for the three ports, each beside a bare mujoco.batch.Batch of the same
# model and substeps (contract overhead), then the divergence rate over 1000-step random-action runs.
# Appends one JSON line per run to benchmarks/logs/sim-$(date +%F).jsonl; figures go by hand to a dated entry of
# benchmarks/history/simulators.md and, as the current figures, to RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p logs
log="logs/sim-$(date +%F).jsonl"
run() { echo "+ isaac-ppo-bench $*" >&2; isaac-ppo-bench "$@" | tail -n 1 | tee -a "$log"; }

for threads in 1 2; do
  run sim task=Ant num_envs=4096 steps=300 sim=mujoco torch_threads=$threads
  run sim task=Humanoid num_envs=4096 steps=200 sim=mujoco torch_threads=$threads
  run sim task=Cartpole num_envs=4096 steps=500 sim=mujoco torch_threads=$threads
done
for task in Ant Humanoid Cartpole; do
  run sim task=$task num_envs=4096 steps=1000 sim=mujoco raw=false torch_threads=1
done
