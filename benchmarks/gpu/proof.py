"""The GPU kit's proof: the CUDA path of isaac-ppo, step by step, each step a process with its own time limit, the
whole within a deadline (9 minutes); a failed or hung step is recorded and the proof goes on. Writes proof.json
(every step's pass/fail, seconds and figures, rewritten after each step) and proof.log (every step's output).

  python3 proof.py --out DIR [--dry] [--only a,b] [--rerun-failed PREVIOUS.json] [--deadline SECONDS]

--dry: the same steps on the CPU device at tiny sizes (Cartpole, 64 envs, 1 iteration): the suite runs it with
CUDA_VISIBLE_DEVICES="" (tests/integration/test_gpu_kit.py). Its pytest steps (contract, equivalence, resume_exact)
collect their selection instead of running it: the suite runs those tests on the CPU itself, and what the dry run
checks is that each command and its selection hold (a selection that matches nothing fails); 117 s to ~80 s. Nor
does it run a command twice (kernels' second run; kernels' command, with raw=true, is bench_sim's): a repeat takes
the first run's result.

Anymal (issue 45) is in every step that lists tasks: the contract and equivalence cases (--mjwarp-all-models),
bench_sim at 4,096 and 16,384 envs and memory (the registry's tasks after Cartpole), and a short training,
bench_train_Anymal_4096 (IsaacGymEnvs' 4,096 envs x 24 steps, 5 iterations). What Anymal adds, measured on
an H100 (2026-11-26, benchmarks/history/gpu-kit.md, "The kit's first proof on a GPU"): bench_sim 14.1 s and 16.0 s,
memory ~10 s of its 29.6 s, bench_train_Anymal_4096 19.0 s, and its contract and equivalence cases; the whole proof
took 426 s of its 480-s deadline with four tasks. With BallBalance (issue 47) the steps took ~630 s (the third
proof: 478 s for 15, the 480-s deadline then cut four, 150 s on their rerun), so the deadline is now 540 s, measured
start-up and transfers leaving room in the 900 s for `run.sh proof --rerun` of whatever it cuts. AnymalTerrain
(issue 46) and FrankaCabinet (issue 47) are in the same steps (contract, equivalence, bench_sim at 4,096 and 16,384
envs, memory).
The fourth proof (2026-11-27, with AnymalTerrain, without FrankaCabinet): 536 s for 19 steps, the deadline cut
memory and bench_train_Anymal_4096 (72 s on their rerun); 680 s of the 900 held in all. FrankaCabinet adds its
cases and benches: expect one rerun call. ShadowHand (issue 47, 8 physics steps a control step) is in the same
steps too; its kernels (tendons, force and torque sensors, a mocap body) are new to the cache.

The fifth proof (2026-11-28, an H200, seven tasks): the steps as then ordered needed ~900 s (contract 141 s and
equivalence 149 s in one pytest process; 540 s for 14 steps, 212 s of the rerun for 7 more, 4 never run): more than
the 900 s lease. So the pytest steps now spread over PYTEST_WORKERS processes, the memory step gives each task 90 s
(FrankaCabinet's 16,384 envs take ~45 s to build), and the steps run in order of what they prove: the checks, every
task's bench_sim at 4,096, the trainings, resume and memory, bench_train_Anymal_4096, and last every task's
bench_sim at 16,384 (figures each proof has measured alike: the deadline cuts them first, and the rerun takes them).
pack.py compiles every registered task's kernels (its tarball is named by
the models' fingerprint, so a new task recompiles); a kernel missing from the carried cache is compiled on the node
by the first step that needs it (the Ant's took 87 s from an empty cache). run.sh calls this; it assumes the
package, MuJoCo, MuJoCo Warp and Hydra importable (installed by the kit, or by pip on a node with network).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
DEADLINE_S = 540  # (the call that runs it also takes the last transfer: at most 600 s a call)
PYTEST_WORKERS = 4  # (the fifth proof: contract 141 s and equivalence 149 s in one process, 7 tasks)

MEMORY = r"""
import json, sys, torch
from isaac_ppo.envs import make
task, device, sizes = sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3].split(",")]
cuda = device.startswith("cuda")
if cuda:
    torch.cuda.init(); torch.zeros(1, device=device)
    free, total = torch.cuda.mem_get_info(); base = total - free
rows = []
for n in sizes:
    env = make(task, n, sim="mjwarp", device=device)
    env.reset()
    for _ in range(20):
        env.step(torch.rand(n, env.num_actions, device=env.device) * 2 - 1)
    row = {"task": task, "num_envs": n}
    if cuda:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        row.update(device_used_mib=round((total - free - base) / 2**20, 1),
                   torch_max_allocated_mib=round(torch.cuda.max_memory_allocated() / 2**20, 1))
    rows.append(row)
    del env
out = {"rows": rows, "measured": "device memory in use (cudaMemGetInfo, Warp's and torch's allocations and "
       "caches, after building the env and 20 steps; envs of a size built after the last are freed first only "
       "as far as the allocators give memory back) and torch.cuda.max_memory_allocated (torch's tensors only)"}
if cuda and len(rows) > 1:
    a, b = rows[0], rows[-1]
    out["device_mib_per_1k_envs"] = round((b["device_used_mib"] - a["device_used_mib"]) * 1000 /
                                          (b["num_envs"] - a["num_envs"]), 2)
print(json.dumps(out))
"""

ENVIRONMENT = r"""
import json, os, torch, warp as wp
wp.config.log_level = wp.LOG_WARNING
wp.init()
from warp._src.context import runtime
out = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
       "warp": wp.config.version, "warp_cuda": wp.is_cuda_available(),
       "warp_cache": wp.config.kernel_cache_dir, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    out.update(gpu=p.name, capability=f"{p.major}.{p.minor}", gpu_memory_gib=round(p.total_memory / 2**30, 1),
               warp_driver=str(runtime.driver_version), warp_toolkit=str(runtime.toolkit_version))
import mujoco, mujoco_warp, hydra, omegaconf, isaac_ppo
out.update(mujoco=mujoco.__version__, hydra=hydra.__version__, omegaconf=omegaconf.__version__,
           isaac_ppo=os.path.dirname(isaac_ppo.__file__))
print(json.dumps(out))
"""


class Proof:
    def __init__(self, out: Path, dry: bool, deadline_s: float):
        self.out, self.dry = out, dry
        self.device = "cpu" if dry else "cuda"
        self.started = time.monotonic()
        self.deadline = self.started + deadline_s
        self.result = {"mode": "dry (CPU device, tiny sizes)" if dry else "gpu", "device": self.device,
                       "deadline_s": deadline_s, "steps": {}, "passed": 0, "failed": []}
        self.log = open(out / "proof.log", "a")
        self.work = Path(tempfile.mkdtemp(prefix="isaac-ppo-proof-"))
        self.ran: dict = {}  # argv -> what it did (a dry run runs a command once)

    # ------------------------------------------------------------------------------------------------

    def run(self, name: str, argv: list, limit: float, env: dict | None = None) -> dict:
        """One process, killed (its whole group) past min(limit, the time left before the deadline)."""
        if self.dry and tuple(argv) in self.ran:  # (dry: kernels' second run, and its command is bench_sim's)
            return dict(self.ran[tuple(argv)], seconds=0.0)  # (what it did, in no time: not run again)
        left = self.deadline - time.monotonic()
        limit = min(limit, left)
        self.log.write(f"\n===== {name}: {' '.join(argv)}  (limit {limit:.0f} s)\n")
        self.log.flush()
        if limit < 5:
            return {"rc": None, "seconds": 0.0, "stdout": "", "stderr": "", "timed_out": True,
                    "why": "no time left before the proof's deadline"}
        t0 = time.monotonic()
        # PYTHONSAFEPATH (Python >= 3.11): `python -m` must not put the checkout first on sys.path, where isaac_ppo/
        # is a half package (its cfg/ and tasks/ are mapped in only by the install)
        child = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ, PYTHONSAFEPATH="1", **(env or {})), start_new_session=True)
        try:
            stdout, stderr = child.communicate(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            stdout, stderr = child.communicate()
            timed_out = True
        seconds = time.monotonic() - t0
        self.log.write(stdout + stderr + f"\n----- {name}: exit {child.returncode} after {seconds:.1f} s"
                       f"{' (killed: over its limit)' if timed_out else ''}\n")
        self.log.flush()
        self.ran[tuple(argv)] = {"rc": child.returncode, "seconds": round(seconds, 1), "stdout": stdout,
                                 "stderr": stderr, "timed_out": timed_out}
        return self.ran[tuple(argv)]

    def record(self, name: str, passed: bool, seconds: float, figures: dict, why: str = "") -> None:
        entry = {"passed": bool(passed), "seconds": round(seconds, 1), "figures": figures}
        if why:
            entry["why"] = why
        self.result["steps"][name] = entry
        self.result["elapsed_s"] = round(time.monotonic() - self.started, 1)
        self.result["passed"] = sum(s["passed"] for s in self.result["steps"].values())
        self.result["failed"] = [n for n, s in self.result["steps"].items() if not s["passed"]]
        (self.out / "proof.json").write_text(json.dumps(self.result, indent=1))
        print(f"[proof] {name}: {'PASS' if passed else 'FAIL'} in {seconds:.1f} s {why}", flush=True)

    def command(self, name: str, argv: list, limit: float, env: dict | None = None, last_json: bool = True) -> dict:
        """A step that is one command: passed when it exits 0 (and, last_json, its last line is a JSON object)."""
        done = self.run(name, argv, limit, env)
        figures, why = {}, ""
        if last_json and done["rc"] == 0:
            try:
                figures = json.loads(done["stdout"].strip().splitlines()[-1])
            except (ValueError, IndexError):
                why = "no JSON on its last line"
        passed = done["rc"] == 0 and not why
        if not passed and not why:
            why = done.get("why") or ("killed at its time limit" if done["timed_out"] else
                                      _last_line(done["stderr"] or done["stdout"]))
        self.record(name, passed, done["seconds"], figures, why)
        return figures

    def pytest(self, name: str, args: list, limit: float) -> None:
        """A pytest selection as one step; in a dry run collected, not run (the module's docstring). On the GPU
        node with pytest-xdist, in PYTEST_WORKERS processes dealt test by test (--dist load, not the suite's
        loadgroup, which keeps every mjwarp test on one worker so that a CPU compiles the kernels once: here they
        come compiled, and most of a step's time is each task's env being built, which overlaps across workers)."""
        collect = ["--collect-only"] if self.dry else []
        spread = ["-n", str(PYTEST_WORKERS), "--dist", "load"] if not self.dry and _has("xdist") else []
        done = self.run(name, [PY, "-m", "pytest", *args, *collect, *spread, "-q", "-p", "no:cacheprovider",
                               f"--mjwarp-device={self.device}"], limit, {"ISAAC_PPO_REQUIRE_SYSTEM": "1"})
        if self.dry:
            found = re.search(r"(\d+)(?:/\d+)? tests? collected", done["stdout"])
            counts = {"collected": int(found.group(1))} if found else {}
            passed = done["rc"] == 0 and counts.get("collected", 0) > 0
        else:
            counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)",
                                                       done["stdout"])}
            passed = done["rc"] == 0 and counts.get("passed", 0) > 0
        why = "" if passed else ("killed at its time limit" if done["timed_out"] else
                                 done.get("why") or _last_line(done["stdout"] + done["stderr"]))
        self.record(name, passed, done["seconds"], counts, why)

    # ------------------------------------------------------------------------------------------------

    def steps(self) -> list:
        """(name, function) in the order they run: the cheap checks first, then what the slot is for."""
        try:  # the registry: every task after Cartpole is benchmarked, at its spec's sizes
            from isaac_ppo.envs import registry

            kit = {name: (list(spec.gpu_kit_envs), list(spec.gpu_kit_memory_envs))
                   for name, spec in registry.specs().items()}
        except ImportError:  # (the environment step says why)
            kit = {name: ([4096, 16384], [1024, 4096, 16384]) for name in ("Ant", "Humanoid")}
        tasks = ["Cartpole"] if self.dry else [t for t in kit if t != "Cartpole"]
        sizes = [64] if self.dry else [4096, 16384]  # (the end-to-end training's)
        throughput = {task: [64] if self.dry else kit[task][0] for task in tasks}
        memory = {task: [64] if self.dry else kit[task][1] for task in tasks}
        train_task = "Cartpole" if self.dry else "Ant"
        train_envs = 64 if self.dry else 4096
        models = [] if self.dry else ["--mjwarp-all-models"]
        only_cartpole = ["-k", "Cartpole"] if self.dry else []
        bench = [PY, "-m", "isaac_ppo.lab.bench"]
        train = [PY, "-m", "isaac_ppo.train"]
        quiet = ["diagnostics=off", "eval.interval_env_steps=0", "eval.final=false"]
        if self.dry:  # (64 envs x 16 steps: a batch smaller than the task's minibatch)
            quiet.append("agent.minibatch_size=512")
        out = [("environment", lambda: self.command("environment", [PY, "-c", ENVIRONMENT], 60)),
               ("kernels", lambda: self.kernels(bench + ["sim", f"task={train_task}", f"num_envs={sizes[0]}",
                                                         "steps=20", "sim=mjwarp", f"device={self.device}",
                                                         *(["raw=true"] if self.dry else [])]))]
        out.append(("contract", lambda: self.pytest("contract", ["tests/integration/test_backend_contract.py", "-k",
                                                                 "mjwarp" + (" and Cartpole" if self.dry else ""),
                                                                 *models], 150)))
        out.append(("equivalence", lambda: self.pytest("equivalence", ["tests/integration/test_mjwarp.py", "-k",
                                                                       "match" + (" and Cartpole" if self.dry else ""),
                                                                       *models], 150)))
        def bench_sim(task: str, n: int) -> tuple:
            name = f"bench_sim_{task}_{n}"
            return (name, lambda: self.command(name, bench + [
                "sim", f"task={task}", f"num_envs={n}", "steps=20" if self.dry else "steps=200", "sim=mjwarp",
                f"device={self.device}", "raw=true"], 90))

        out.extend(bench_sim(task, throughput[task][0]) for task in tasks)
        for n in ([train_envs] if self.dry else [train_envs, 16384]):  # end to end, against the 1M env steps/s goal
            name = f"bench_train_{train_task}_{n}"
            out.append((name, lambda name=name, n=n: self.command(name, bench + [
                "train", f"task={train_task}", "sim=mjwarp", f"device={self.device}", f"num_envs={n}",
                "iterations=1" if self.dry else "iterations=5", *(quiet[:2] + quiet[3:] if self.dry else [])], 120)))
        out.append(("mujoco_cuda_learner", lambda: self.command("mujoco_cuda_learner", bench + [
            "train", f"task={train_task}", "sim=mujoco", f"device={self.device}", f"num_envs={train_envs}",
            "iterations=1" if self.dry else "iterations=3", *(quiet[:2] + quiet[3:] if self.dry else [])], 90)))
        out.append(("mixed_precision_resume", lambda: self.mixed_precision_resume(train, train_task, train_envs,
                                                                                   quiet)))
        out.append(("resume_exact", lambda: self.pytest("resume_exact", [
            "tests/integration/test_loop_in_process.py", "-k",
            "test_resume_continues_exactly and " + ("fixed and mjwarp and cpu" if self.dry else "cuda")], 150)))
        out.append(("memory", lambda: self.memory(memory)))
        if not self.dry and "Anymal" in kit:
            out.append(("bench_train_Anymal_4096", lambda: self.command("bench_train_Anymal_4096", bench + [
                "train", "task=Anymal", "sim=mjwarp", f"device={self.device}", "num_envs=4096", "iterations=5"], 120)))
        larger = sorted({n for task in tasks for n in throughput[task][1:]})
        out.extend(bench_sim(task, n) for n in larger for task in tasks if n in throughput[task][1:])  # (last: see
        # the module's docstring)
        return out

    def kernels(self, argv: list) -> None:
        """Whether Warp's kernel cache holds what the task needs (the carried ahead-of-time cubins): the cache's
        files before and after a first run and a second one; files added by the first are kernels compiled here
        (cache misses), and a first run as fast as the second found everything."""
        cache = Path(os.environ.get("WARP_CACHE_PATH") or Path.home() / ".cache" / "warp")
        before = _cache_files(cache)
        first = self.run("kernels (first run)", argv, 180)
        middle = _cache_files(cache)
        second = self.run("kernels (second run)", argv, 60)
        kind = "cpu" if self.dry else "cuda"
        added = {k: middle[k] - before[k] for k in before}
        figures = {"cache": str(cache), "before": before, "after": middle, "added_by_first_run": added,
                   "compiled_here": added[kind], "first_run_s": first["seconds"], "second_run_s": second["seconds"],
                   "measured": "files in WARP_CACHE_PATH by kind (cubin/ptx: CUDA, o: CPU) before and after the "
                               "first run; a cache hit writes nothing"}
        passed = first["rc"] == 0 and second["rc"] == 0
        self.record("kernels", passed, first["seconds"] + second["seconds"], figures,
                    "" if passed else _last_line(first["stderr"] or second["stderr"]))

    def mixed_precision_resume(self, train: list, task: str, envs: int, quiet: list) -> None:
        """3 iterations with agent.mixed_precision=true, then a resume of its last.pt to 5 (dry: 1, then to 2; on
        a CPU without BF16 an autocast iteration takes ~1.7 s, and one on each side of the resume proves it)."""
        first_n, last_n = (1, 2) if self.dry else (3, 5)
        runs = self.work / "amp"
        common = [f"task={task}", "sim=mjwarp", f"device={self.device}", f"num_envs={envs}", "seed=0",
                  "agent.mixed_precision=true", f"runs_dir={runs}", "experiment=amp", *quiet]
        t0 = time.monotonic()
        first = self.run(f"mixed_precision ({first_n} iterations)", train + common + [f"max_iterations={first_n}"], 90)
        found = sorted(runs.glob("amp/*/checkpoints/last.pt"))
        figures = {"first_rc": first["rc"]}
        second = {"rc": None, "timed_out": False, "stderr": "no last.pt after the first run"}
        if first["rc"] == 0 and found:
            second = self.run(f"mixed_precision (resume to {last_n})", train + common + [
                f"max_iterations={last_n}", f"resume={found[-1]}"], 90)
            figures["resume_rc"] = second["rc"]
            rows = [json.loads(line) for path in sorted(runs.glob("amp/*/metrics.jsonl"))
                    for line in path.read_text().splitlines() if line.strip()]
            figures["iterations_logged"] = sorted({r["iteration"] for r in rows if "iteration" in r})
            figures["env_steps"] = max((r.get("env_steps", 0) for r in rows), default=0)
        passed = second["rc"] == 0
        self.record("mixed_precision_resume", passed, time.monotonic() - t0, figures,
                    "" if passed else _last_line(second["stderr"] or first["stderr"]))

    def memory(self, sizes_of: dict) -> None:
        """Each task's GPU memory at each of its sizes (task -> sizes)."""
        t0 = time.monotonic()
        figures, failed = {}, []
        for task, sizes in sizes_of.items():
            done = self.run(f"memory {task}", [PY, "-c", MEMORY, task, self.device, ",".join(map(str, sizes))], 90)
            try:
                figures[task] = json.loads(done["stdout"].strip().splitlines()[-1])
            except (ValueError, IndexError):
                failed.append(f"{task}: {_last_line(done['stderr'])}")
        self.record("memory", not failed, time.monotonic() - t0, figures, "; ".join(failed))

    def main(self, only: set | None) -> dict:
        try:
            for name, step in self.steps():
                if only is not None and name not in only:
                    continue
                try:
                    step()
                except Exception as error:  # (a step's own bug must not end the proof)
                    self.record(name, False, 0.0, {}, f"{type(error).__name__}: {error}")
        finally:  # (the steps' own runs: each dry proof in the suite had left one behind in TMPDIR)
            shutil.rmtree(self.work, ignore_errors=True)
        self.result["elapsed_s"] = round(time.monotonic() - self.started, 1)
        (self.out / "proof.json").write_text(json.dumps(self.result, indent=1))
        return self.result


def _cache_files(cache: Path) -> dict:
    counts = {"cuda": 0, "cpu": 0}
    if cache.is_dir():
        for path in cache.rglob("*"):
            if path.suffix in (".cubin", ".ptx"):
                counts["cuda"] += 1
            elif path.suffix == ".o":
                counts["cpu"] += 1
    return counts


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _last_line(text: str) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def main(argv: list) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--dry", action="store_true")
    parser.add_argument("--only", default=None, help="comma-separated step names")
    parser.add_argument("--rerun-failed", default=None, help="a previous proof.json: run only its failed steps")
    parser.add_argument("--deadline", type=float, default=DEADLINE_S)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    if args.rerun_failed:
        only = set(json.loads(Path(args.rerun_failed).read_text())["failed"])
    result = Proof(out, args.dry, args.deadline).main(only)
    print(f"[proof] {result['passed']} passed, {len(result['failed'])} failed in {result['elapsed_s']} s: "
          f"{out / 'proof.json'}", flush=True)
    return 0 if not result["failed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
