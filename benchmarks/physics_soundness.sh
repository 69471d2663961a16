#!/usr/bin/env bash
# Issue 44's soundness runs: policies TRAINED under a candidate physics, then gait-checked at 1x, 2x and 4x finer
# steps (benchmarks/physics_candidates.py gait), plus the candidates' divergence rates and the exploit replays.
# Resumable: a seed whose run ended (metrics.json) is not trained again; one cut short continues from its last.pt
# (isaac-ppo-train continues a run of the same config in its folder).
#
#   bash benchmarks/physics_soundness.sh ant CANDIDATE SEED [SEED ...]   # paper_ant's adaptive_256x256 arm
#   bash benchmarks/physics_soundness.sh humanoid SEED                    # profile=cpu, 8M env steps, its physics
#   bash benchmarks/physics_soundness.sh measures [CANDIDATE ...]         # divergence rates, exploit replays
#   bash benchmarks/physics_soundness.sh gait CANDIDATE CHECKPOINT ...    # gait checks of trained policies
#
# TRAIN_EXTRA (environment): more isaac-ppo-train overrides for the trainings, e.g. TRAIN_EXTRA=torch_threads=1 for
# two runs pinned to one core each (taskset -c N): no oversubscribed core, and env steps are what they measure.
# Results append to benchmarks/logs/{ant,humanoid}-physics-*-<date>.jsonl; runs go to runs/physics/.
set -euo pipefail
cd "$(dirname "$0")/.."
day=$(date +%F)
logs=benchmarks/logs
what=$1
shift

# paper_ant's adaptive_256x256 arm (cfg/study/paper_ant.yaml): the configuration that found both exploits
ANT_ARM=(task=Ant sim=mujoco agent.num_mini_batches=2 max_diverged_fraction=1 max_env_steps=14680064
         eval.interval_env_steps=2097152 save_interval_iterations=16 num_envs=256 agent.horizon=256
         agent.lr_schedule=adaptive agent.learning_rate=3.0e-4 diagnostics=off)

physics_of() {  # the candidate's task.mujoco overrides, from physics_candidates.py's table
  python - "$1" <<'EOF'
import sys
sys.path.insert(0, "benchmarks")
from physics_candidates import overrides
print(" ".join(overrides(sys.argv[1])))
EOF
}

case $what in
  ant)
    candidate=$1
    shift
    for seed in "$@"; do
      run=runs/physics/$candidate/adaptive_256x256/seed_$seed
      if [ ! -f "$run/metrics.json" ]; then
        # shellcheck disable=SC2046
        isaac-ppo-train "${ANT_ARM[@]}" seed="$seed" $(physics_of "$candidate") hydra.run.dir="$run" ${TRAIN_EXTRA:-} \
          > "/tmp/physics-$candidate-$seed.log" 2>&1
      fi
      python benchmarks/physics_candidates.py gait "$candidate" "$run/checkpoints/last.pt" --envs 64 --steps 1000 \
        | tee -a "$logs/ant-physics-gait-$day.jsonl"
    done
    ;;
  humanoid)
    for seed in "$@"; do
      run=runs/physics/humanoid_cpu/seed_$seed
      if [ ! -f "$run/metrics.json" ]; then
        isaac-ppo-train task=Humanoid sim=mujoco profile=cpu diagnostics=off seed="$seed" max_env_steps=8000000 \
          save_interval_iterations=50 hydra.run.dir="$run" ${TRAIN_EXTRA:-} > "/tmp/physics-humanoid-$seed.log" 2>&1
      fi
      for refine in 1 2 4; do
        python benchmarks/gait_check.py "$run/checkpoints/last.pt" --task Humanoid --envs 64 --steps 1000 \
          --refine $refine | tee -a "$logs/humanoid-physics-gait-$day.jsonl"
      done
    done
    ;;
  measures)  # (the candidates named, else all of physics_candidates.py's)
    python benchmarks/physics_candidates.py diverge --envs 512 ${1:+--only "$@"} | tee -a "$logs/ant-physics-diverge-$day.jsonl"
    python benchmarks/physics_candidates.py exploits --envs 16 --steps 300 ${1:+--only "$@"} \
      | tee -a "$logs/ant-physics-exploits-$day.jsonl"
    ;;
  gait)  # CANDIDATE CHECKPOINT...: replay checkpoints trained elsewhere under a candidate at 1x, 2x, 4x
    candidate=$1
    shift
    python benchmarks/physics_candidates.py gait "$candidate" "$@" --envs 64 --steps 1000 \
      | tee -a "$logs/ant-physics-gait-$day.jsonl"
    ;;
  *)
    echo "usage: $0 ant CANDIDATE SEED... | humanoid SEED... | measures [CANDIDATE...] | gait CANDIDATE CHECKPOINT..." >&2
    exit 2
    ;;
esac
