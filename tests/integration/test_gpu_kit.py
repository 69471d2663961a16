"""The GPU kit (benchmarks/gpu/): its plan of transfers stays inside the device tool's limits and the slot's time;
pieces cut by the packer travel, join with their checksums checked and install offline through the node's runner
(run.sh receive), on small fake wheels, no network; the proof's steps cover what the issue asks of a GPU; and the
runner's proof runs end to end on the CPU device in its dry mode (slow: ~1 minute of real MuJoCo Warp); its
training stops on time and brings back a run folder that replays on mujoco.batch (slow: ~20 s)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import MJWARP_WORKER, require_system

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "benchmarks" / "gpu"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"gpu_kit_{name}", GPU / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kit = load("kit")


def locked_files() -> list:
    """What pack.py carries, as lock.json measured it: each file (warp-lang repacked), the kernels' archive."""
    lock = json.loads((GPU / "lock.json").read_text())
    files = [{"name": e["name"], **{k: e.get("repacked", e)[k] for k in ("bytes", "sha256")}} for e in lock["files"]]
    if "kernels" in lock:
        files.append({"name": lock["kernels"]["name"], "bytes": lock["kernels"]["bytes"], "sha256": "-"})
    return files


def test_the_plan_of_the_locked_files_fits_each_transfer_and_the_slot():
    """Each transfer (the working tree as it is now, its pieces, its manifest) within 64 MiB; every byte of every
    file in exactly one piece, in order; start-up + transfers + the proof's deadline leave time for a rerun."""
    files = locked_files()
    assert sum(f["bytes"] for f in files) > 100 * kit.MIB  # (warp-lang: the plan really is several transfers)
    plan = kit.plan(files, kit.tree_bytes(REPO))
    for transfer in plan["transfers"]:
        assert kit.transfer_bytes(plan, transfer) <= kit.LIMIT, transfer["folder"]
        assert transfer["carry"] == [transfer["folder"]] and "run.sh receive" in transfer["command"]
    assert "run.sh proof" in plan["transfers"][-1]["command"]
    for f in files:
        pieces = [p for t in plan["transfers"] for p in t["pieces"] if p["file"] == f["name"]]
        assert [p["offset"] for p in pieces] == [sum(p["bytes"] for p in pieces[:i]) for i in range(len(pieces))]
        assert sum(p["bytes"] for p in pieces) == f["bytes"] and [p["part"] for p in pieces] == list(
            range(1, len(pieces) + 1))
    estimate = kit.estimate(plan)
    assert estimate["fits"], estimate
    assert estimate["startup_s"] == 60 and estimate["proof_s"] == 540 and estimate["left_for_rerun_s"] >= 60
    # conservative against what the loans measured (a start ~30 s, a call ~6 s, ~8 MiB/s): each call pays a fixed
    # cost and sends the tree again; the proof and the last transfer share one call of at most 600 s
    assert kit.CALL_S >= 15 and kit.RATE_BPS <= 6 * kit.MIB and kit.PROOF_S + kit.CALL_S <= 600


def test_a_tree_that_leaves_no_room_is_refused():
    with pytest.raises(ValueError, match="no room"):
        kit.plan(locked_files(), kit.LIMIT - kit.MIB)


def fake_wheel(folder: Path, name: str, payload: bytes) -> Path:
    """A minimal wheel of one module whose data is payload (random bytes: it does not compress)."""
    path = folder / f"{name}-1.0-py3-none-any.whl"
    dist = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/__init__.py", "from pathlib import Path\nSIZE = len((Path(__file__).parent / 'data.bin')"
                                          ".read_bytes())\n")
        z.writestr(f"{name}/data.bin", payload)
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")
    return path


def cut_fake_transfers(tmp_path: Path):
    """Two fake wheels and a kernels archive, cut for a 300 KiB transfer: the big wheel in pieces."""
    import tarfile

    source = tmp_path / "downloads"
    source.mkdir()
    paths = [fake_wheel(source, "kitfake_small", os.urandom(20_000)),
             fake_wheel(source, "kitfake_big", os.urandom(700_000))]
    cubin = source / "1.19.0" / "wp_mod_abc" / "wp_mod_abc.sm90.cubin"
    cubin.parent.mkdir(parents=True)
    cubin.write_bytes(os.urandom(5000))
    kernels = source / "kernels-sm90.tar.xz"
    with tarfile.open(kernels, "w:xz") as tar:
        tar.add(cubin, "1.19.0/wp_mod_abc/wp_mod_abc.sm90.cubin")
    paths.append(kernels)
    files = [{"name": p.name, "bytes": p.stat().st_size, "sha256": kit.sha256(p)} for p in paths]
    plan = kit.plan(files, tree=0, limit=300 * 1024, margin=0)
    parts = tmp_path / "parts"
    kit.cut(plan, {p.name: p for p in paths}, parts)
    return plan, parts


def runner(*args: str, kit_dir: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(GPU / "run.sh"), *args], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHON=sys.executable, ISAAC_PPO_KIT=str(kit_dir), **env))


def test_pieces_travel_join_with_checksums_and_install_offline(tmp_path):
    plan, parts = cut_fake_transfers(tmp_path)
    assert len(plan["transfers"]) >= 3 and any(p["parts"] > 1 for t in plan["transfers"] for p in t["pieces"])
    node = tmp_path / "node-kit"
    for transfer in plan["transfers"]:
        folder = parts / f"t{transfer['index']}"
        done = runner("receive", str(folder), kit_dir=node)
        assert done.returncode == 0, done.stderr
        assert [p.name for p in folder.iterdir()] == ["transfer.json"]  # the pieces moved out to the kit
    assert not list((node / "pieces").iterdir())  # every piece joined
    check = subprocess.run([sys.executable, "-c", "import kitfake_big, kitfake_small; print(kitfake_big.SIZE, "
                            "kitfake_small.SIZE)"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(node / "site")))
    assert check.stdout.split() == ["700000", "20000"], check.stderr
    assert (node / "warp-cache" / "1.19.0" / "wp_mod_abc" / "wp_mod_abc.sm90.cubin").stat().st_size == 5000


def test_a_damaged_piece_is_refused_and_nothing_is_installed(tmp_path):
    plan, parts = cut_fake_transfers(tmp_path)
    first = parts / "t1"
    piece = next(p for p in first.iterdir() if p.name != "transfer.json")
    data = bytearray(piece.read_bytes())
    data[len(data) // 2] ^= 0xFF
    piece.write_bytes(bytes(data))
    done = runner("receive", str(first), kit_dir=tmp_path / "node-kit")
    assert done.returncode != 0 and "checksum differs" in done.stderr and "send this transfer again" in done.stderr
    assert not (tmp_path / "node-kit" / "site").exists()


def test_the_proof_covers_the_cuda_path_for_every_task_after_cartpole(tmp_path):
    from isaac_ppo.envs.registry import registered_tasks

    proof = load("proof").Proof(tmp_path, dry=False, deadline_s=540)
    names = [name for name, _ in proof.steps()]
    tasks = [t for t in registered_tasks() if t != "Cartpole"]
    expected = ["environment", "kernels", "contract", "equivalence"] + [f"bench_sim_{t}_4096" for t in tasks] + [
        "bench_train_Ant_4096", "bench_train_Ant_16384", "mujoco_cuda_learner", "mixed_precision_resume",
        "resume_exact", "memory", "bench_train_Anymal_4096"] + [f"bench_sim_{t}_16384" for t in tasks]
    assert names == expected  # (the figures every proof measured alike last, where the deadline cuts first)
    assert proof.device == "cuda" and load("proof").DEADLINE_S == kit.PROOF_S


@pytest.mark.slow
@MJWARP_WORKER
def test_the_proof_runs_end_to_end_in_dry_mode_on_the_cpu(tmp_path):
    """run.sh proof --dry: every step of the GPU proof, on Warp's CPU device with CUDA hidden, Cartpole at 64
    envs and 1 iteration; one JSON with each step passed, and the log."""
    if importlib.util.find_spec("mujoco_warp") is None:
        require_system("the kit's dry run needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    out, scratch = tmp_path / "out", tmp_path / "tmp"
    scratch.mkdir()
    done = runner("proof", "--dry", kit_dir=tmp_path / "kit", OUT=str(out), CUDA_VISIBLE_DEVICES="",
                  TMPDIR=str(scratch))
    result = json.loads((out / "proof.json").read_text())
    assert done.returncode == 0, (result["failed"], done.stdout[-2000:])
    assert result["device"] == "cpu" and result["failed"] == [] and result["passed"] == 10
    steps = result["steps"]
    # (the dry run collects its pytest selections: the suite runs those tests itself)
    assert steps["contract"]["figures"]["collected"] >= 7 and steps["equivalence"]["figures"]["collected"] >= 2
    assert steps["resume_exact"]["figures"]["collected"] >= 1
    assert steps["bench_sim_Cartpole_64"]["figures"]["raw_steps_per_s"] > 0
    assert steps["mixed_precision_resume"]["figures"]["iterations_logged"] == [0, 1]  # (dry: 1, resumed to 2)
    assert set(steps["kernels"]["figures"]["before"]) == {"cuda", "cpu"}
    assert (out / "proof.log").stat().st_size > 0 and (tmp_path / "kit" / "proof.json").exists()
    assert not list(scratch.glob("isaac-ppo-proof-*"))  # its steps' own runs, removed when it ends


@pytest.mark.slow
@MJWARP_WORKER
def test_the_kit_trains_for_its_seconds_and_brings_back_a_run_folder_that_replays_on_mujoco(tmp_path):
    """run.sh train --dry: Cartpole on Warp's CPU device, stopped by SIGTERM 3 s after its first iteration; what
    comes back is a run folder (config, metrics, last.pt, best.pt) and train.json, and its policy plays on
    mujoco.batch, the backend the gait check replays GPU-trained policies on."""
    if importlib.util.find_spec("mujoco_warp") is None:
        require_system("the kit's dry run needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    out = tmp_path / "out"
    done = runner("train", "--dry", "Cartpole", "3", kit_dir=tmp_path / "kit", OUT=str(out),
                  CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run = out / "train_Cartpole"
    result = json.loads((run / "train.json").read_text())
    assert result["rc"] == 75 and not result["killed"]  # (stopped by its SIGTERM, its checkpoint saved)
    assert result["sigterm_at_s"] - result["first_row_s"] >= 3
    assert result["brought"] == ["config.yaml", "metrics.jsonl", "checkpoints/last.pt", "checkpoints/best.pt"]
    assert result["iterations"] >= 1 and result["env_steps"] == 1024 * result["iterations"]
    assert result["evaluations"] and all(e["episodes"] == 8 for e in result["evaluations"])
    assert [entry["threshold"] for entry in result["solve_times"]] == [475.0]  # (Cartpole's, from its metrics.json)
    assert len([p for p in out.rglob("*") if p.is_file()]) <= 8  # (the device tool brings back 8 files at most)
    play = subprocess.run([sys.executable, "-m", "isaac_ppo.train", "task=Cartpole", "sim=mujoco", "test=true",
                           f"checkpoint={run / 'checkpoints' / 'best.pt'}", "play_episodes=2",
                           f"runs_dir={tmp_path / 'play'}"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)  # (not the checkout, whose isaac_ppo/ lacks the installed package's cfg/)
    assert play.returncode == 0, play.stderr[-2000:]


FAKE_TRAINER = r"""
import json, os, signal, sys, time
runs, delay = sys.argv[1], float(sys.argv[2])
run = os.path.join(runs, "train_Fake", "2026-01-01_00-00-00")
os.makedirs(os.path.join(run, "checkpoints"))
open(os.path.join(run, "config.yaml"), "w").write("task: {name: Fake}\n")
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(time.monotonic()))
started = time.monotonic()
while not stop and time.monotonic() - started < delay:  # the build
    time.sleep(0.05)
iteration = 0
while not stop:
    with open(os.path.join(run, "metrics.jsonl"), "a") as f:
        f.write(json.dumps({"iteration": iteration, "env_steps": 100 * (iteration + 1), "fps": 1000}) + "\n")
    iteration += 1
    time.sleep(0.2)
open(os.path.join(run, "checkpoints", "last.pt"), "w").write("saved")
sys.exit(75)
"""


@pytest.mark.parametrize("build_s, expect_rows", [(0.5, True), (30.0, False)])
def test_the_kits_training_is_stopped_by_sigterm_on_time_even_after_a_slow_build(tmp_path, monkeypatch,
                                                                                  build_s, expect_rows):
    """train.py's clock, on a fake trainer: SIGTERM SECONDS after the first row; a build that would leave no time to
    save before the cap still gets its SIGTERM SAVE_S before the cap (not a SIGKILL), and the run's last.pt."""
    train = load("train")
    monkeypatch.setattr(train, "CAP_S", 4.0)
    monkeypatch.setattr(train, "SAVE_S", 2.0)
    monkeypatch.setattr(train, "POLL_S", 0.1)
    script = tmp_path / "fake_trainer.py"
    script.write_text(FAKE_TRAINER)
    runs = tmp_path / "runs"
    with open(tmp_path / "log", "w") as log:
        done = train.train([sys.executable, str(script), str(runs), str(build_s)], runs, "Fake", 1.0, log)
    assert done["rc"] == 75 and not done["killed"]
    run = train.run_folder(runs, "Fake")
    assert (run / "checkpoints" / "last.pt").read_text() == "saved"
    if expect_rows:
        assert done["sigterm_at_s"] - done["first_row_s"] >= 1.0 and len(train.rows(run)) >= 3
    else:  # (stopped at SECONDS + CAP_S - SAVE_S = 3 s, before its 30-s build ended)
        assert done["first_row_s"] is None and 3.0 <= done["sigterm_at_s"] < 4.0 and train.rows(run) == []
