"""The GPU kit's training: one task trained on the node's GPU for a set time, and what a check made back home
needs brought back (issue 47: a ShadowHand policy that turns the block, for its gait check on the CPU).

  python3 train.py --out DIR --task ShadowHand --seconds 470 [--dry] [OVERRIDE ...]

Runs `isaac-ppo-train task=TASK sim=mjwarp device=cuda seed=0` with GPU_SETTINGS and the overrides given, for
SECONDS of training counted from its first iteration's row (the env's build and the kernels' loading before it
are not counted: ShadowHand's 16,384 envs and its kernels are built in the first minute), then sends SIGTERM: the
trainer ends its iteration, saves last.pt and exits 75 (isaac_ppo/loop/stops.py). A run that ends first (its
max_iterations) exits 0. Whatever happens, the process is killed CAP_S seconds past SECONDS from its start, and a
build slow enough to leave less is stopped by SIGTERM SAVE_S before that (its training shorter, its last.pt saved).

What comes back, in DIR/train_TASK/ (a run folder's layout, what benchmarks/gait_check.py reads): config.yaml,
metrics.jsonl, checkpoints/last.pt and checkpoints/best.pt; and DIR/train_TASK/train.json: the command, its exit
status, the seconds of building and of training, env steps, the median env steps/s, every evaluation, the run's
time to solve (metrics.json's solve_times and measure_solve_times) and the output's last lines. Five files: the device tool brings back at most 8 (16 MiB each, two folders down), and a
call that also runs the proof adds its 3 (proof.json, proof.log, nvidia-smi.txt).

--dry: Cartpole on Warp's CPU device, 64 envs, CUDA hidden (tests/integration/test_gpu_kit.py).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from isaac_ppo.lab.watch import read_rows  # (whole rows: one still being written is left out)

REPO = Path(__file__).resolve().parents[2]
CAP_S = 120  # past SECONDS: the build before the first iteration, the last iteration and its save
GRACE_S = 60  # after SIGTERM: the iteration under way, an evaluation under way, the save
SAVE_S = 30  # SIGTERM comes at least this long before the cap, however late the first iteration came
POLL_S = 1.0  # how often the clock looks at the run's rows
# On a GPU a step of every eval world is one graph replay (256 envs at little more cost than 64), and an evaluation every
# 2M env steps (the CPU's default) would come every ~10 s at ShadowHand's ~200k env steps/s
GPU_SETTINGS = ["eval.interval_env_steps=10000000", "eval.num_envs=256"]
DRY_SETTINGS = ["num_envs=64", "eval.interval_env_steps=2048", "eval.num_envs=8", "agent.minibatch_size=512",
                "diagnostics=off", "max_iterations=1000000"]
BROUGHT = ("config.yaml", "metrics.jsonl", "checkpoints/last.pt", "checkpoints/best.pt")


def command(task: str, runs: Path, dry: bool, overrides: list) -> list:
    device = "cpu" if dry else "cuda"
    return [sys.executable, "-m", "isaac_ppo.train", f"task={task}", "sim=mjwarp", f"device={device}", "seed=0",
            f"runs_dir={runs}", f"experiment=train_{task}", *(DRY_SETTINGS if dry else GPU_SETTINGS), *overrides]


def rows(run: Path) -> list:
    return read_rows(str(run / "metrics.jsonl"))


def run_folder(runs: Path, task: str):
    found = sorted((runs / f"train_{task}").glob("*/config.yaml"))
    return found[-1].parent if found else None


def train(argv: list, runs: Path, task: str, seconds: float, log) -> dict:
    """The trainer, stopped by SIGTERM SECONDS after its first row; killed (its group) at SECONDS + CAP_S."""
    started = time.monotonic()
    child = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                             env=dict(os.environ, PYTHONSAFEPATH="1", PYTHONUNBUFFERED="1"))
    first_row_s, terminated_s, killed = None, None, False
    while child.poll() is None:
        time.sleep(POLL_S)
        now = time.monotonic() - started
        if first_row_s is None:
            run = run_folder(runs, task)
            if run is not None and rows(run):
                first_row_s = now
        due = first_row_s is not None and now - first_row_s >= seconds
        if terminated_s is None and (due or now >= seconds + CAP_S - SAVE_S):  # (a slow build: stop it in time to save)
            os.killpg(child.pid, signal.SIGTERM)
            terminated_s = now
        late = (terminated_s is not None and now - terminated_s > GRACE_S) or now > seconds + CAP_S
        if late and child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            killed = True
            child.wait()
    return {"rc": child.returncode, "seconds": round(time.monotonic() - started, 1),
            "first_row_s": None if first_row_s is None else round(first_row_s, 1),
            "sigterm_at_s": None if terminated_s is None else round(terminated_s, 1), "killed": killed}


def summary(run, done: dict) -> dict:
    logged = rows(run) if run is not None else []
    iterations = [r for r in logged if "iteration" in r]
    fps = [r["fps"] for r in iterations if r.get("fps")]
    evaluations = [dict(r["eval"]) for r in logged if isinstance(r.get("eval"), dict)]
    # time to solve as the run recorded it (metrics.json, written also when SIGTERM stops it): the task's return
    # thresholds and its solve_measures' (ShadowHand's successes), without a sixth file to bring back
    finished = run / "metrics.json" if run is not None else None
    recorded = json.loads(finished.read_text()) if finished is not None and finished.is_file() else {}
    return dict(done, iterations=len(iterations),
                env_steps=max((r.get("env_steps", 0) for r in iterations), default=0),
                median_env_steps_per_s=round(statistics.median(fps)) if fps else None,
                evaluations=evaluations,
                **{key: recorded[key] for key in ("solve_times", "measure_solve_times") if key in recorded})


def main(argv: list) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--task", required=True)
    parser.add_argument("--seconds", type=float, required=True, help="of training, from the first iteration")
    parser.add_argument("--dry", action="store_true")
    args, overrides = parser.parse_known_args(argv)
    task = "Cartpole" if args.dry else args.task
    out = Path(args.out) / f"train_{task}"
    out.mkdir(parents=True, exist_ok=True)
    runs = Path(tempfile.mkdtemp(prefix="isaac-ppo-train-"))
    argv = command(task, runs, args.dry, overrides)
    log_path = runs / "train.log"
    print(f"[train] {' '.join(argv)}  ({args.seconds:.0f} s of training)", flush=True)
    with open(log_path, "w") as log:
        done = train(argv, runs, task, args.seconds, log)
    run = run_folder(runs, task)
    for name in BROUGHT:
        if run is not None and (run / name).is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(run / name, out / name)
    result = dict(summary(run, done), task=task, command=argv,
                  brought=[name for name in BROUGHT if (out / name).is_file()],
                  output_tail=log_path.read_text().splitlines()[-40:])
    (out / "train.json").write_text(json.dumps(result, indent=1))
    shutil.rmtree(runs, ignore_errors=True)  # (what came back is in out; the numbered checkpoints stay behind)
    print(f"[train] exit {done['rc']} after {done['seconds']} s: {result['iterations']} iterations, "
          f"{result['env_steps']} env steps, {len(result['evaluations'])} evaluations; {out}", flush=True)
    ok = done["rc"] in (0, 75) and not done["killed"] and "checkpoints/last.pt" in result["brought"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
