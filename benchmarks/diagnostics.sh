#!/usr/bin/env bash
# Overhead of the diagnostics on Ant at its default size (4096 x 16): the same 20-iteration run with
# diagnostics=off, default (every 10 iterations) and full (every iteration, all variants, coverage), in turn.
# Reports each run's training wall time and the probe's own measured time (diagnostics_s, summed).
# Appends JSON lines to benchmarks/logs/diagnostics-$(date +%F).jsonl; figures go by hand to a dated entry of
# benchmarks/history/diagnostics.md and, as the current figures, to RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p logs
log="$PWD/logs/diagnostics-$(date +%F).jsonl"
runs="${1:-/tmp/isaac-ppo-diagnostics-bench}"
for setting in off default full off default; do
  isaac-ppo-train task=Ant sim=mujoco diagnostics=$setting max_iterations=20 save_interval_iterations=1000 \
    runs_dir="$runs" experiment=ant_$setting > /dev/null
  python - "$runs/ant_$setting" "$setting" <<'PY' | tee -a "$log"
import glob, json, sys
run = sorted(glob.glob(sys.argv[1] + "/*"))[-1]
rows = [json.loads(line) for line in open(run + "/metrics.jsonl")]
probe = sum(r.get("diagnostics_s", 0.0) for r in rows)
wall = rows[-1]["wall_s"]
print(json.dumps({"bench": "diagnostics_overhead", "diagnostics": sys.argv[2], "iterations": len(rows),
                  "wall_s": wall, "probe_s": round(probe, 3), "probe_share": round(probe / wall, 5),
                  "measured_iterations": sum("diagnostics" in r for r in rows)}))
PY
done
