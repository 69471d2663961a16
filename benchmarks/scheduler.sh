#!/usr/bin/env bash
# Benchmarks of the scheduler issue, on the embedded MuJoCo backend:
# 1. sync vs concurrent (HTS-RL) iteration time at Ant's default size (4096 x 16), with collect and update
#    times measured alone beside it (isaac-ppo-bench train);
# 2. a schedule on Ant that changes the split mid-run (2048 x 32 -> 4096 x 16 at iteration 3): collection
#    env-steps/s per active env before and after the change, beside a fixed 2048 x 32 run;
# 3. Cartpole learning, sync vs concurrent, seeds 42 1 2: the first iteration with mean return >= 400.
# Appends JSON lines to benchmarks/logs/scheduler-$(date +%F).jsonl; figures go by hand to a dated entry of
# benchmarks/history/schedulers.md and, as the current figures, to RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p logs
log="$PWD/logs/scheduler-$(date +%F).jsonl"
runs="${1:-/tmp/isaac-ppo-scheduler-bench}"

for scheduler in fixed concurrent; do
  isaac-ppo-bench train task=Ant sim=mujoco scheduler=$scheduler iterations=3 | tail -n 1 | tee -a "$log"
done

summarise() {  # per-iteration plan and collection speed per active env of a run directory
  python - "$1" "$2" <<'PY' | tee -a "$log"
import glob, json, sys
run = sorted(glob.glob(sys.argv[1] + "/*"))[-1]
for r in map(json.loads, open(run + "/metrics.jsonl")):
    print(json.dumps({"bench": sys.argv[2], "iteration": r["iteration"], "num_envs": r["num_envs"],
                      "rollout_length": r["rollout_length"], "collect_s": r["collect_s"],
                      "fps_collect": round(r["fps_collect"]), "fps_collect_per_env": round(r["fps_collect"] / r["num_envs"], 2)}))
PY
}
isaac-ppo-train task=Ant sim=mujoco scheduler=schedule scheduler.batch_size=65536 'scheduler.num_envs=[[0,2048],[3,4096]]' \
  max_iterations=6 runs_dir="$runs" experiment=ant_schedule save_interval_iterations=1000 > /dev/null
summarise "$runs/ant_schedule" ant_schedule
isaac-ppo-train task=Ant sim=mujoco scheduler=budget scheduler.batch_size=65536 scheduler.num_envs=2048 \
  max_iterations=3 runs_dir="$runs" experiment=ant_fixed2048 save_interval_iterations=1000 > /dev/null
summarise "$runs/ant_fixed2048" ant_fixed2048

for scheduler in fixed concurrent; do
  for seed in 42 1 2; do
    isaac-ppo-train task=Cartpole sim=mujoco scheduler=$scheduler seed=$seed max_iterations=100 \
      runs_dir="$runs" experiment=cartpole_${scheduler}_$seed > /dev/null
    python - "$runs/cartpole_${scheduler}_$seed" "$scheduler" "$seed" <<'PY' | tee -a "$log"
import glob, json, sys
run = sorted(glob.glob(sys.argv[1] + "/*"))[-1]
rows = [json.loads(line) for line in open(run + "/metrics.jsonl")]
first = next((r["iteration"] for r in rows if (r["window_mean_return"] or 0) >= 400), None)
print(json.dumps({"bench": "cartpole_learning", "scheduler": sys.argv[2], "seed": int(sys.argv[3]),
                  "first_iteration_ge_400": first, "best": round(max(r["window_mean_return"] or 0 for r in rows), 1),
                  "wall_s": rows[-1]["wall_s"]}))
PY
  done
done
