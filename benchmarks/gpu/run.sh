#!/usr/bin/env bash
# The GPU kit's runner, on the GPU node (see docs/backends.md, "A GPU kit for offline nodes").
#
#   bash benchmarks/gpu/run.sh receive FOLDER   # a transfer arrived: move its pieces into the kit (persistent,
#                                               # $ISAAC_PPO_KIT, default /tmp/isaac-ppo-kit), join every file
#                                               # whose pieces are all there (checksums checked), install it offline
#   bash benchmarks/gpu/run.sh proof [--dry] [--rerun] [--only a,b]
#                                               # install the project without its dependencies into the kit (when
#                                               # the kit holds the packages), then the proof (proof.py)
#   bash benchmarks/gpu/run.sh train [--dry] TASK SECONDS [OVERRIDE ...]
#                                               # train TASK on the GPU for SECONDS from its first iteration, then
#                                               # bring back its run folder's config, metrics and checkpoints (train.py)
#   bash benchmarks/gpu/run.sh                  # the proof alone, on a node where the project is installed normally
#
# Results: proof.json and proof.log in $OUT (the device tool's folder that comes back) or $ISAAC_PPO_KIT/out, and a
# copy of proof.json in the kit, which --rerun reads to run again only the steps that failed.
# --dry: the same steps on the CPU device at tiny sizes, CUDA hidden (what the test suite runs).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
KIT=${ISAAC_PPO_KIT:-/tmp/isaac-ppo-kit}
PY=${PYTHON:-python3}
RESULTS=${OUT:-$KIT/out}
mkdir -p "$KIT" "$RESULTS"

use_kit() {  # the packages the kit installed, and its kernel cache, when it has them
    if [ -d "$KIT/site" ]; then
        export PYTHONPATH="$KIT/site${PYTHONPATH:+:$PYTHONPATH}"
        export PATH="$KIT/site/bin:$PATH"
    fi
    if [ -d "$KIT/warp-cache" ]; then
        export WARP_CACHE_PATH="$KIT/warp-cache"
    fi
}

install_project() {  # the checkout into the kit, without dependencies (they came as wheels)
    if [ -n "${DRY:-}" ] && "$PY" -c "import isaac_ppo, mujoco_warp, hydra" 2>/dev/null; then
        echo "[kit] dry run: isaac_ppo, mujoco_warp and hydra already importable; project install skipped"
        return 0
    fi
    echo "[kit] installing the project from $REPO into $KIT/site (no index, no dependencies)"
    "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade \
        --target "$KIT/site" "$REPO"
}

command=${1:-proof}
[ $# -gt 0 ] && shift
case "$command" in
    receive)
        [ $# -eq 1 ] || { echo "usage: run.sh receive FOLDER" >&2; exit 2; }
        "$PY" "$HERE/kit.py" receive "$1" --kit "$KIT"
        ;;
    proof)
        args=()
        DRY=
        while [ $# -gt 0 ]; do
            case "$1" in
                --dry) DRY=1; args+=(--dry) ;;
                --rerun) args+=(--rerun-failed "$KIT/proof.json") ;;
                --only) args+=(--only "$2"); shift ;;
                *) echo "run.sh proof: unknown argument $1" >&2; exit 2 ;;
            esac
            shift
        done
        if [ -n "$DRY" ]; then
            export CUDA_VISIBLE_DEVICES=""
        fi
        use_kit
        if [ -d "$KIT/site" ] || [ -n "$DRY" ]; then
            install_project || { echo "[kit] the project did not install: proof not run" >&2; exit 1; }
        fi
        (command -v nvidia-smi >/dev/null && nvidia-smi) > "$RESULTS/nvidia-smi.txt" 2>&1
        "$PY" "$HERE/proof.py" --out "$RESULTS" "${args[@]}"
        status=$?
        cp "$RESULTS/proof.json" "$KIT/proof.json" 2>/dev/null
        exit $status
        ;;
    train)
        DRY=
        args=()
        if [ "${1:-}" = "--dry" ]; then DRY=1; args+=(--dry); shift; fi
        [ $# -ge 2 ] || { echo "usage: run.sh train [--dry] TASK SECONDS [OVERRIDE ...]" >&2; exit 2; }
        task=$1 seconds=$2
        shift 2
        if [ -n "$DRY" ]; then
            export CUDA_VISIBLE_DEVICES=""
        fi
        use_kit
        if [ -d "$KIT/site" ] || [ -n "$DRY" ]; then
            install_project || { echo "[kit] the project did not install: nothing trained" >&2; exit 1; }
        fi
        "$PY" "$HERE/train.py" --out "$RESULTS" --task "$task" --seconds "$seconds" "${args[@]}" "$@"
        ;;
    *)
        echo "usage: run.sh receive FOLDER | run.sh proof [--dry] [--rerun] [--only STEP,...] |" \
             "run.sh train [--dry] TASK SECONDS [OVERRIDE ...]" >&2
        exit 2
        ;;
esac
