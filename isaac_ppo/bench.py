"""isaac-ppo-bench: measure the pieces of training on this machine; the last line printed is one JSON object.

  isaac-ppo-bench sim task=Ant num_envs=4096 [steps=200 sim=mujoco seed=0 device=cpu nthread=N torch_threads=N raw=true]

  isaac-ppo-bench train task=Ant [iterations=5 and any isaac-ppo-train override]

``train`` times collection alone (rollout and GAE), the update alone, and full training iterations at the
task's default size, and reports ``collect_s``, ``update_s``, ``iteration_s`` (means) and
``env_steps_per_s``.

nthread sets MuJoCo's batch threads (default: one per CPU), torch_threads torch's intra-op threads (default:
torch's own). On a CPU both pools share the same cores.

``sim`` steps the env with uniform random actions, observation, reward and reset work included, and reports
``env_steps_per_s``. On MuJoCo it also steps a bare ``mujoco.batch.Batch`` of the same model and substeps,
interleaved in blocks within the same run and started from the env's own states, and reports the contract's
overhead over it (``contract_overhead`` = raw rate / env rate - 1).
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any, Dict, List, Optional

from isaac_ppo import preload

USAGE = (
    "usage: isaac-ppo-bench sim task=NAME [num_envs=N steps=N sim=auto|mujoco|isaacgym seed=N device=D "
    "nthread=N torch_threads=N raw=true|false]\n"
    "       isaac-ppo-bench train task=NAME [iterations=N and any isaac-ppo-train override]"
)

SIM_DEFAULTS: Dict[str, Any] = {
    "task": "Ant", "num_envs": None, "steps": 200, "sim": "auto", "seed": 0, "device": "cpu",
    "nthread": None, "torch_threads": None, "raw": True, "block": 10,
}


def parse_overrides(argv: List[str], defaults: Dict[str, Any]) -> Dict[str, Any]:
    """key=value words into a dict typed like defaults; unknown keys and bad values raise UserError."""
    from isaac_ppo.errors import UserError

    args = dict(defaults)
    for word in argv:
        key, sep, value = word.partition("=")
        if not sep or key not in defaults:
            raise UserError(f"unknown argument {word!r}; known keys: {', '.join(defaults)}")
        default = defaults[key]
        try:
            if isinstance(default, bool):
                if value.lower() not in ("true", "false"):
                    raise ValueError(value)
                args[key] = value.lower() == "true"
            elif isinstance(default, int) or default is None and key in ("num_envs", "nthread", "torch_threads"):
                args[key] = int(value)
            else:
                args[key] = value
        except ValueError:
            raise UserError(f"{key}={value!r} is not a valid {type(default).__name__ if default is not None else 'int'}")
    return args


def bench_sim(args: Dict[str, Any]) -> Dict[str, Any]:
    import torch

    from isaac_ppo.envs import make
    from isaac_ppo.envs.make import resolve_sim

    if args["torch_threads"] is not None:
        torch.set_num_threads(args["torch_threads"])
    overrides = {} if args["nthread"] is None else {"mujoco": {"nthread": args["nthread"]}}
    backend = resolve_sim(args["sim"])
    env = make(args["task"], args["num_envs"], sim=backend, seed=args["seed"], device=args["device"], **overrides)
    n, steps, block = env.num_envs, args["steps"], args["block"]
    generator = torch.Generator().manual_seed(args["seed"])
    actions = [
        (torch.rand(n, env.num_actions, generator=generator) * 2 - 1).to(env.device) for _ in range(16)
    ]
    raw = _RawBatch(env) if args["raw"] and backend == "mujoco" else None

    env.reset()
    for i in range(block):  # warm-up: first resets, allocator, thread pool
        env.step(actions[i % 16])
        if raw is not None:
            raw.run(actions[:1])
    env_time = raw_time = 0.0
    resets = diverged = 0
    for start in range(0, steps, block):
        count = min(block, steps - start)
        t0 = time.perf_counter()
        for i in range(start, start + count):
            _, _, reset, extras = env.step(actions[i % 16])
            resets += int(reset.sum())
            diverged += extras.get("diverged", 0)
        env_time += time.perf_counter() - t0
        if raw is not None:
            raw_time += raw.run([actions[i % 16] for i in range(start, start + count)])
    result: Dict[str, Any] = {
        "bench": "sim", "task": args["task"], "sim": backend, "num_envs": n, "steps": steps,
        "env_steps_per_s": round(n * steps / env_time),
        "episodes_ended": resets, "diverged": diverged,
        "diverged_per_million_steps": round(1e6 * diverged / (n * steps), 3),
    }
    if raw is not None:
        raw_rate = n * steps / raw_time
        result.update(
            raw_batch_steps_per_s=round(raw_rate),
            contract_overhead=round(raw_rate / result["env_steps_per_s"] - 1, 4),
            nthread=env.batch.nthread, substeps=env.substeps,
        )
    result["torch_threads"] = torch.get_num_threads()
    return result


class _RawBatch:
    """A bare mujoco.batch.Batch of the env's model: controls in, substeps, nothing else."""

    def __init__(self, env: Any):
        from mujoco.batch import Batch

        self.env = env
        self.batch = Batch(env.model, env.num_envs, env.batch.nthread)
        self.ctrl = self.batch.bind("ctrl")

    def run(self, actions: List[Any]) -> float:
        """Step once per action tensor from the env's current states; seconds spent stepping."""
        self.batch.state[:] = self.env.batch.state  # same state distribution as the env (fallen robots reset)
        controls = [a.cpu().numpy() * self.env.power_scale for a in actions]
        t0 = time.perf_counter()
        for control in controls:
            self.ctrl[:] = control
            self.batch.step(None, self.env.substeps)
        return time.perf_counter() - t0


def bench_train(overrides: List[str], iterations: int = 5) -> Dict[str, Any]:
    """Collection alone, update alone, and full iterations (logging, checkpoint policy and, for a
    concurrent plan, the overlap of collection with the update included), at the config's size; means over
    `iterations` after one warm-up iteration."""
    import tempfile

    import torch

    from isaac_ppo.io.checkpoint import Checkpointer
    from isaac_ppo.io.logger import RunLogger
    from isaac_ppo.runner import Runner
    from isaac_ppo.train import build_env_and_scheduler, compose_config

    cfg = compose_config(overrides)
    torch.set_num_threads(int(cfg.torch_threads))
    env, scheduler = build_env_and_scheduler(cfg)
    with tempfile.TemporaryDirectory() as run_dir:
        runner = Runner(cfg, env, run_dir, scheduler)
        runner.checkpointer = Checkpointer(run_dir, int(cfg.save_interval))
        logger = RunLogger(run_dir, cfg.task.name, None, quiet=True)
        plan = runner.plan_of(0, 0)
        gamma, lam = float(cfg.agent.gamma), float(cfg.agent.lam)

        def collect() -> Any:
            torch.set_num_threads(int(cfg.collect_torch_threads))
            buffer, info = runner.collector.collect(plan, runner.model)
            buffer.compute_gae(info["last_values"], gamma, lam)
            torch.set_num_threads(int(cfg.torch_threads))
            return buffer

        def full() -> None:
            row = runner.step()
            logger.log(row)
            runner.checkpointer.after_iteration(row["iteration"], runner.state_dict, row["mean_return"])

        buffer = collect()
        runner.ppo.update(buffer, plan)  # warm-up
        collect_s = _mean_time(collect, iterations)
        update_s = _mean_time(lambda: runner.ppo.update(buffer, plan), iterations)
        full()  # warm-up: with a concurrent plan, this iteration starts the first collection ahead
        iteration_s = _mean_time(full, iterations)
        runner.state_dict()  # waits for a batch still in flight
        logger.close()
    return {
        "bench": "train", "task": cfg.task.name, "mode": plan.mode, "num_envs": plan.num_envs,
        "rollout_length": plan.rollout_length, "iterations": iterations, "collect_s": round(collect_s, 4),
        "update_s": round(update_s, 4), "iteration_s": round(iteration_s, 4),
        "glue_ratio": round(iteration_s / (collect_s + update_s), 4),
        "overlap_floor_s": round(max(collect_s, update_s), 4),
        "env_steps_per_s": round(plan.batch_size / iteration_s),
        "torch_threads": int(cfg.torch_threads), "collect_torch_threads": int(cfg.collect_torch_threads),
    }


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
    mode, rest = argv[0], argv[1:]
    if mode not in ("sim", "train"):
        print(f"isaac-ppo-bench: unknown mode {mode!r}; available: sim, train\n{USAGE}", file=sys.stderr)
        return 2
    from isaac_ppo.errors import UserError

    try:
        if mode == "sim":
            args = parse_overrides(rest, SIM_DEFAULTS)
            if args["sim"] in ("auto", "isaacgym"):
                preload.isaacgym_first()
            result = bench_sim(args)
        else:
            iterations = [w for w in rest if w.startswith("iterations=")]
            overrides = [w for w in rest if not w.startswith("iterations=")]
            if all(not w.startswith("sim=") or w[4:] in ("auto", "isaacgym") for w in overrides):
                preload.isaacgym_first()
            count = parse_overrides(iterations, {"iterations": 5})["iterations"]
            result = bench_train(overrides, count)
    except UserError as error:
        print(f"isaac-ppo-bench: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
