"""isaac-ppo-bench: measure the pieces of training on this machine; the last line printed is one JSON object.

  isaac-ppo-bench sim task=Ant num_envs=4096 [steps=200 sim=mujoco|mjwarp seed=0 device=cpu nthread=N torch_threads=1 raw=true]

  isaac-ppo-bench train task=Ant [iterations=5 and any isaac-ppo-train override]

  isaac-ppo-bench peers task=Ant [mode=throughput|learning seeds=0,1,2 iterations=N and any isaac-ppo-train override]

``train`` times collection alone (rollout and GAE), the update alone, and full training iterations at the
task's default size, and reports ``collect_s``, ``update_s``, ``iteration_s`` (means) and
``env_steps_per_s``; an iteration that evaluated (and, concurrent, the next) is left out of ``iteration_s``
(``iterations_timed`` of ``iterations`` are in it; ``evaluations``, ``eval_s``: the evaluations apart).

``peers`` trains the task with isaac-ppo and with rl-games (``agent.backend=rl_games``: the same env, batch,
network and hyper-parameters, cfg/agent/<task>PPO.yaml), alternating per seed (isaac-ppo seed s, rl-games
seed s, next seed), each a subprocess of isaac-ppo-train with ``diagnostics=off`` in one runs_dir under /tmp,
and compares their metrics.jsonl: ``env_steps_per_s`` (env steps / wall time of the iterations after the
first: each learner's own clock, collection and update), mean ``collect_s`` and ``update_s`` over those
iterations (rl-games' are its epoch's ``play_time``, which includes GAE, and ``update_time``, the arguments
of its ``write_stats``), and, at the last env-step count every run reached, the evaluated return (the number to
compare: each run's own evaluation, eval.* on its eval envs, at the same env steps for every run; IQM and 95%
bootstrap CI over the seeds, or over the evaluation's episodes with one seed) beside the training window's
``window_mean_return`` (lagged: shown, not compared on).
``mode=throughput`` (default): seed 0, 10 iterations; ``mode=learning``: seeds 0,1,2, the task's
``agent.max_epochs``. It prints a table, one JSON line per run, and last the comparison as one JSON object.

``sim`` steps the env with uniform random actions and, on the MuJoCo backends, the bare simulator beside it
(isaac_ppo/lab/bench_sim.py says how); nthread sets mujoco.batch's threads (default: one per CPU), torch_threads
torch's intra-op threads (default 1: what training's collection uses). On a CPU both pools share the cores.
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any, Dict, List, Optional

from isaac_ppo import preload

USAGE = (
    "usage: isaac-ppo-bench sim task=NAME [num_envs=N steps=N sim=auto|mujoco|mjwarp|isaacgym seed=N device=D "
    "nthread=N torch_threads=N raw=true|false]\n"
    "       isaac-ppo-bench train task=NAME [iterations=N and any isaac-ppo-train override]\n"
    "       isaac-ppo-bench peers task=NAME [mode=throughput|learning seeds=0,1,2 iterations=N and any "
    "isaac-ppo-train override]"
)
MODES = ("sim", "train", "peers")
PEERS = ("isaac_ppo", "rl_games")  # agent.backend values, in the order each seed runs them
PEER_MODES = {"throughput": {"seeds": [0], "iterations": 10}, "learning": {"seeds": [0, 1, 2], "iterations": None}}


def own_keys(mode: str) -> Dict[str, Any]:
    """Each mode's own keys and their domains (lab/args.py checks them before an env is built or a run starts):
    sim's are bench_sim.SIM_KEYS; peers' seeds are isaac-ppo-train's seed= (-1: a random one)."""
    from isaac_ppo.domains import integer
    from isaac_ppo.lab import args
    from isaac_ppo.lab.bench_sim import SIM_KEYS

    return {"sim": SIM_KEYS, "train": {"iterations": args.number(integer(1))},
            "peers": {"task": args.task(), "mode": args.one_of(*PEER_MODES), "seeds": args.integers(integer(-1)),
                      "iterations": args.number(integer(1))}}[mode]


def parse_overrides(argv: List[str]) -> Dict[str, Any]:
    """sim's key=value words over its defaults, each checked against its domain."""
    from isaac_ppo.lab.args import parse
    from isaac_ppo.lab.bench_sim import SIM_DEFAULTS

    return {**SIM_DEFAULTS, **parse(argv, own_keys("sim"), "see isaac-ppo-bench --help").own}


def bench_train(overrides: List[str], iterations: int = 5) -> Dict[str, Any]:
    """Collection alone, update alone, and full iterations (logging, checkpoint policy and, for a
    concurrent plan, the overlap of collection with the update included; iterations that evaluated left out,
    the evaluations reported apart), at the config's size; means over `iterations` after one warm-up
    iteration."""
    import tempfile

    import torch

    from isaac_ppo.loop.build import build_env_and_scheduler, build_runner
    from isaac_ppo.errors import UserError
    from isaac_ppo.io.logger import RunLogger
    from isaac_ppo.config.compose import compose_config

    cfg = compose_config(overrides)
    torch.set_num_threads(cfg.torch_threads)
    env, scheduler = build_env_and_scheduler(cfg)
    with tempfile.TemporaryDirectory() as run_dir:
        runner = build_runner(cfg, env, run_dir, scheduler)
        logger = RunLogger(run_dir, cfg.task.name, None, quiet=True).begin()
        plan = runner.plan_of(0, 0)
        gamma, lam = cfg.agent.gamma, cfg.agent.lam

        def collect() -> Any:
            torch.set_num_threads(runner.batches.collect_threads)  # (the run's: a concurrent run's is torch_threads)
            buffer, info = runner.collector.collect(plan, runner.model)
            buffer.compute_gae(info["last_values"], gamma, lam)
            torch.set_num_threads(cfg.torch_threads)
            return buffer

        def full() -> Optional[float]:
            """One iteration; the seconds its evaluation took, if one was due."""
            row = runner.step()
            logger.log(row)
            runner.checkpointer.after_iteration(row["iteration"], runner.state_dict, runner.policy_state,
                                                row["window_mean_return"])
            return row["eval"]["seconds"] if row.get("eval") else None

        buffer = collect()
        runner.ppo.update(buffer, plan)  # warm-up
        collect_s = _mean_time(collect, iterations)
        update_s = _mean_time(lambda: runner.ppo.update(buffer, plan), iterations)
        full()  # warm-up: with a concurrent plan, this iteration starts the first collection ahead
        timed = []  # (seconds, evaluation seconds or None) per timed iteration
        for _ in range(iterations):
            t0 = time.perf_counter()
            evaluated = full()
            timed.append((time.perf_counter() - t0, evaluated))
        # an iteration that evaluated is not an iteration's time (on a GPU one evaluation takes as long as ~20
        # Ant iterations: 1000 sequential steps of eval.num_envs worlds), nor, with a concurrent plan, the next
        # one, whose batch was collected beside that evaluation
        concurrent = plan.mode == "concurrent"
        clean = [t for i, (t, e) in enumerate(timed)
                 if e is None and not (concurrent and i > 0 and timed[i - 1][1] is not None)]
        evaluations = [e for _, e in timed if e is not None]
        runner.state_dict()  # waits for a batch still in flight
        logger.close()
    if not clean:
        raise UserError(f"each of the {iterations} timed iterations evaluated or followed an evaluation: raise "
                        "iterations= or eval.interval_env_steps")
    iteration_s = sum(clean) / len(clean)
    return {
        "bench": "train", "task": cfg.task.name, "mode": plan.mode, "num_envs": plan.num_envs,
        "rollout_length": plan.rollout_length, "iterations": iterations, "collect_s": round(collect_s, 4),
        "update_s": round(update_s, 4), "iteration_s": round(iteration_s, 4),
        "glue_ratio": round(iteration_s / (collect_s + update_s), 4),
        "overlap_floor_s": round(max(collect_s, update_s), 4),
        "env_steps_per_s": round(plan.batch_size / iteration_s),
        "torch_threads": cfg.torch_threads, "collect_torch_threads": runner.batches.collect_threads,
        "iterations_timed": len(clean), "evaluations": len(evaluations), "eval_s": round(sum(evaluations), 4),
    }


def peers_args(argv: List[str]) -> Dict[str, Any]:
    """peers' own keys (task, mode, seeds, iterations) and the isaac-ppo-train overrides passed on to both."""
    from isaac_ppo.errors import UserError
    from isaac_ppo.lab.args import key_of, parse

    own = {"task": "Ant", "mode": "throughput"}
    words = parse(argv, own_keys("peers"), "see isaac-ppo-bench --help", hands_on=True)
    own.update(words.own)
    overrides = words.train
    for word in overrides:
        if key_of(word) in ("seed", "agent", "agent.backend", "max_iterations", "runs_dir", "experiment", "test"):
            raise UserError(f"{key_of(word)}= is set by peers itself: use seeds=..., iterations=... instead")
    defaults = PEER_MODES[own["mode"]]
    return {"task": own["task"], "mode": own["mode"], "seeds": own.get("seeds", defaults["seeds"]),
            "iterations": own.get("iterations", defaults["iterations"]), "overrides": overrides}


def run_peer(backend: str, seed: int, args: Dict[str, Any], runs_dir: str) -> Dict[str, Any]:
    """One isaac-ppo-train subprocess; its metrics.jsonl rows, metrics.json and wall time."""
    import glob
    import os
    import subprocess

    from isaac_ppo.errors import UserError

    experiment = f"peers_{backend}_s{seed}"
    from isaac_ppo.lab.watch import train_command

    script = train_command()
    command = script + [
        f"task={args['task']}", f"seed={seed}", f"agent.backend={backend}", f"runs_dir={runs_dir}",
        f"experiment={experiment}", "diagnostics=off",
    ] + ([f"max_iterations={args['iterations']}"] if args["iterations"] is not None else []) + args["overrides"]
    print(f"[peers] {backend} seed {seed}: isaac-ppo-train {' '.join(command[len(script):])}", flush=True)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    process_s = time.perf_counter() - started
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise UserError(f"{backend} seed {seed} failed (exit {done.returncode}): {lines[-1] if lines else ''}")
    found = sorted(glob.glob(os.path.join(runs_dir, experiment, "*")))
    if not found:
        raise UserError(f"{backend} seed {seed} left no run directory under {os.path.join(runs_dir, experiment)}")
    run_dir = found[-1]
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(run_dir, "metrics.json")) as f:
        summary = json.load(f)
    return {"backend": backend, "seed": seed, "run_dir": run_dir, "rows": rows, "summary": summary,
            "process_s": process_s}


def peer_stats(run: Dict[str, Any]) -> Dict[str, Any]:
    """A run's throughput over its iterations after the first (the first pays for warm-up)."""
    rows = run["rows"]
    timed = rows[1:] if len(rows) > 1 else rows
    before = rows[0] if len(rows) > 1 else {"env_steps": 0, "wall_s": 0.0}
    steps = rows[-1]["env_steps"] - before["env_steps"]
    seconds = rows[-1]["wall_s"] - before["wall_s"]

    def mean(key: str) -> Optional[float]:
        values = [r[key] for r in timed if isinstance(r.get(key), (int, float))]
        return round(sum(values) / len(values), 4) if values else None

    return {"env_steps_per_s": round(steps / seconds) if seconds > 0 else None, "collect_s": mean("collect_s"),
            "update_s": mean("update_s"), "iteration_s": mean("iteration_s"), "iterations": len(rows),
            "env_steps": rows[-1]["env_steps"], "process_s": round(run["process_s"], 2)}


def window_return_at(rows: List[Dict[str, Any]], env_steps: int) -> Optional[float]:
    """The training window's return in the last row at or before env_steps (None when no episode had finished)."""
    value = None
    for row in rows:
        if row["env_steps"] <= env_steps:
            value = row.get("window_mean_return")
    return value


def evaluation_at(run: Dict[str, Any], env_steps: int) -> Optional[Dict[str, Any]]:
    """The run's last evaluation (periodic, or its final one) at or before env_steps; None when none was."""
    found = [row["eval"] for row in run["rows"] if "eval" in row] + [run["summary"].get("final_eval")]
    found = [e for e in found if e and e["env_steps"] <= env_steps and e.get("return_mean") is not None]
    return max(found, key=lambda e: e["env_steps"]) if found else None


def compare_evaluations(evaluations: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The runs' evaluated return as the report states it: the IQM and its 95% stratified bootstrap CI, over the
    seeds (of each seed's mean evaluated return) with several, over the evaluation's episodes with one."""
    from isaac_ppo.stats import iqm, stratified_bootstrap_ci

    if not evaluations:
        return {"eval_return_iqm": None, "eval_ci95": None, "eval_env_steps": None, "eval_ci_over": None}
    if len(evaluations) > 1:
        values = [e["return_mean"] for e in evaluations]
        value, (low, high) = iqm(values), stratified_bootstrap_ci(values, ["all"] * len(values))
        over = f"{len(values)} seeds"
    else:
        only = evaluations[0]
        value, (low, high), over = only["return_iqm"], only["return_ci95"], f"{only['episodes']} episodes"
    return {"eval_return_iqm": round(value, 3), "eval_ci95": [round(low, 3), round(high, 3)],
            "eval_env_steps": sorted({e["env_steps"] for e in evaluations}), "eval_ci_over": over}


def bench_peers(args: Dict[str, Any]) -> Dict[str, Any]:
    import tempfile

    runs_dir = tempfile.mkdtemp(prefix="isaac-ppo-peers-")
    runs = []
    for seed in args["seeds"]:  # alternating: a drift in the machine's load hits both agents alike
        for backend in PEERS:
            run = run_peer(backend, seed, args, runs_dir)
            run["stats"] = peer_stats(run)
            runs.append(run)
            print(json.dumps(dict({"bench": "peers_run", "task": args["task"], "agent": backend, "seed": seed},
                                  **run["stats"], run_dir=run["run_dir"])), flush=True)
    common = min(run["rows"][-1]["env_steps"] for run in runs)  # the last env-step count every run reached
    first = runs[0]["rows"][0]
    agents: Dict[str, Any] = {}
    for backend in PEERS:
        mine = [run for run in runs if run["backend"] == backend]
        returns = [r for r in (window_return_at(run["rows"], common) for run in mine) if r is not None]
        evaluations = [e for e in (evaluation_at(run, common) for run in mine) if e is not None]

        def mean(key: str) -> Optional[float]:
            values = [run["stats"][key] for run in mine if run["stats"][key] is not None]
            return round(sum(values) / len(values), 4) if values else None

        rate = mean("env_steps_per_s")
        agents[backend] = {
            "env_steps_per_s": round(rate) if rate is not None else None, "collect_s": mean("collect_s"),
            "update_s": mean("update_s"), "iteration_s": mean("iteration_s"), "process_s": mean("process_s"),
            "window_return_at_common_steps": round(sum(returns) / len(returns), 3) if returns else None,
            "runs": len(mine),
        }
        agents[backend].update(compare_evaluations(evaluations))
    ours, theirs = agents["isaac_ppo"]["env_steps_per_s"], agents["rl_games"]["env_steps_per_s"]
    result = {
        "bench": "peers", "task": args["task"], "mode": args["mode"], "seeds": args["seeds"],
        "iterations": args["iterations"], "num_envs": first["num_envs"], "rollout_length": first["rollout_length"],
        "batch_size": first["batch_size"], "overrides": args["overrides"], "common_env_steps": common,
        "agents": agents, "speedup": round(ours / theirs, 3) if ours and theirs else None, "runs_dir": runs_dir,
    }
    _print_peers_table(result)
    return result


def _print_peers_table(result: Dict[str, Any]) -> None:
    def cell(value: Any, digits: int = 3) -> str:
        if value is None:
            return "-"
        return f"{value:,.0f}" if isinstance(value, int) or abs(value) >= 1000 else f"{value:.{digits}f}"

    seeds = ",".join(str(s) for s in result["seeds"])
    print(f"\n[peers] {result['task']}: {result['num_envs']} envs x {result['rollout_length']} steps, "
          f"{result['iterations'] or 'agent.max_epochs'} iterations, seeds {seeds}; runs in {result['runs_dir']}")
    header = ["agent", "env-steps/s", "collect_s", "update_s", "iteration_s", "eval return IQM (95% CI)",
              "training window (lagged)"]
    lines = [header]
    for backend, stats in result["agents"].items():
        ci = stats["eval_ci95"]
        evaluated = f"{cell(stats['eval_return_iqm'], 2)} ({cell(ci[0], 2)} to {cell(ci[1], 2)})" if ci else "-"
        lines.append([backend, cell(stats["env_steps_per_s"]), cell(stats["collect_s"]), cell(stats["update_s"]),
                      cell(stats["iteration_s"]), evaluated, cell(stats["window_return_at_common_steps"], 2)])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        cells = [text.ljust(width) if i == 0 else text.rjust(width) for i, (text, width) in enumerate(zip(line, widths))]
        print("  ".join(cells))
    overs = {backend: stats["eval_ci_over"] for backend, stats in result["agents"].items() if stats["eval_ci_over"]}
    print(f"returns at {result['common_env_steps']:,} env steps, the last count every run reached. Compare the "
          f"evaluation (each run's policy from reset on its own eval envs; CI over "
          f"{', '.join(sorted(set(overs.values()))) or '-'}); the training window lags the policy.")
    if result["speedup"]:
        print(f"isaac-ppo / rl-games env-steps/s: {result['speedup']:.2f}x")
    sys.stdout.flush()


def _mean_time(fn: Any, repeats: int) -> float:
    total = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        total += time.perf_counter() - t0
    return total / repeats


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    preload.idle_threads_sleep()  # (before torch)
    mode, rest = argv[0], argv[1:]
    if mode not in MODES:
        print(f"isaac-ppo-bench: unknown mode {mode!r}; available: {', '.join(MODES)}\n{USAGE}", file=sys.stderr)
        return 2
    from isaac_ppo.errors import UserError

    from isaac_ppo.lab.bench_sim import bench_sim

    try:
        if mode == "sim":
            args = parse_overrides(rest)
            if args["sim"] in ("auto", "isaacgym"):
                preload.isaacgym_first()
            result = bench_sim(args)
        elif mode == "peers":
            result = bench_peers(peers_args(rest))
        else:
            from isaac_ppo.lab.args import parse

            words = parse(rest, own_keys("train"), "see isaac-ppo-bench --help", hands_on=True)
            overrides = words.train
            if all(not w.startswith("sim=") or w[4:] in ("auto", "isaacgym") for w in overrides):
                preload.isaacgym_first()
            result = bench_train(overrides, words.own.get("iterations", 5))
    except UserError as error:
        print(f"isaac-ppo-bench: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
