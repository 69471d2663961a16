#!/usr/bin/env bash
# Cartpole learning targets (benchmarks, not tests): mean return >= 400 within 60 iterations at the default size
# (512 envs x 16 steps), synchronous; and with concurrent collection (one-update-stale batches) within the
# task's default budget of 100 iterations. Seeds 0 1 2; prints each run's best mean return and the iteration
# it first reached 400.
# With STALE=1, concurrent collection also under each other update of a stale batch (agent/stale.py: the clip
# against the behaviour policy, the proximal clip alone, HTS-RL's delayed update, V-trace alone, the proximal clip's
# whole or truncated importance weight), 100 iterations each (issue 90: within 1.2x sync's iterations to 400?).
# Usage: bash benchmarks/cartpole_learning.sh [RUNS_DIR]   (default /tmp/isaac-ppo-cartpole-runs)
set -euo pipefail
runs="${1:-/tmp/isaac-ppo-cartpole-runs}"
# (each arm's overrides against the default: V-trace with the proximal clip and no importance weight)
declare -A STALE_ARMS=([behaviour]="agent.stale_clip=behaviour agent.stale_correction=none"
                       [proximal]="agent.stale_correction=none" [delayed]="agent.stale_update=delayed"
                       [vtrace]="agent.stale_clip=behaviour" [whole_weight]="agent.stale_weight=importance"
                       [truncated_weight]="agent.stale_weight=truncated")
for seed in 0 1 2; do
  isaac-ppo-train task=Cartpole sim=mujoco seed=$seed max_iterations=60 experiment=sync_seed$seed \
    runs_dir="$runs" > /dev/null
  isaac-ppo-train task=Cartpole sim=mujoco seed=$seed max_iterations=100 scheduler=concurrent \
    experiment=concurrent_seed$seed runs_dir="$runs" > /dev/null
  if [ "${STALE:-0}" = 1 ]; then
    for arm in "${!STALE_ARMS[@]}"; do
      isaac-ppo-train task=Cartpole sim=mujoco seed=$seed max_iterations=100 scheduler=concurrent \
        ${STALE_ARMS[$arm]} experiment=concurrent_${arm}_seed$seed runs_dir="$runs" > /dev/null  # (split: words)
    done
  fi
done
python - "$runs" <<'PY'
import glob, json, os, sys
for run in sorted(glob.glob(os.path.join(sys.argv[1], "*", "*"))):
    rows = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))]
    first = next((r["iteration"] + 1 for r in rows if (r["window_mean_return"] or 0) >= 400), None)
    best = max((r["window_mean_return"] for r in rows if r["window_mean_return"] is not None), default=None)
    print(f"{os.path.basename(os.path.dirname(run)):<20} iterations {len(rows):>3}  best {best:8.1f}  "
          f"first >= 400 at iteration {first}")
PY
