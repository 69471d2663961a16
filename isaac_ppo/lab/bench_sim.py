"""isaac-ppo-bench sim: step a task's env with uniform random actions and, beside it, the bare simulator.

The env is stepped through the VecEnv contract (observations, rewards, resets and the copy to device included)
and reports ``env_steps_per_s``. On the MuJoCo backends it also steps a bare simulator of the same model and
substeps (``raw=true``): a ``mujoco.batch.Batch`` on sim=mujoco, a MuJoCo Warp Data replaying the recorded
substep graph on sim=mjwarp; interleaved with the env in blocks within the same run, each block started from the
env's own states (fallen robots reset, as the env sees them), and reports the contract's overhead over it
(``contract_overhead`` = raw rate / env rate - 1). The bare simulator's controls are the actions x powerScale where
the task's actions are its actuators' controls (one each); a task whose actions mean something else (rotor forces,
an operational-space controller: Quadcopter, Ingenuity, FrankaCubeStack) holds the controls its env last set.

Threads are training's by default (torch_threads=1: collection runs torch on collect_torch_threads=1, the
update on torch_threads), so the figure is the one a training run's collection sees; the JSON states them.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List

from isaac_ppo.config.checks import RUN_DOMAINS
from isaac_ppo.domains import integer
from isaac_ppo.lab import args as lab_args

SIM_DEFAULTS: Dict[str, Any] = {
    "task": "Ant", "num_envs": None, "steps": 200, "sim": "auto", "seed": 0, "device": "cpu",
    "nthread": None, "torch_threads": 1, "raw": True, "block": 10,
}
# each key's domain (lab/args.py checks them before the env is built); None above: the task's numEnvs and
# mujoco.nthread
SIM_KEYS: Dict[str, lab_args.Arg] = {
    "task": lab_args.task(), "num_envs": lab_args.number(integer(1)), "steps": lab_args.number(integer(1)),
    "sim": lab_args.one_of(*RUN_DOMAINS["sim"].choices),
    "seed": lab_args.number(integer(0, 10**18)),  # torch.Generator's seed (at most 2**63 - 1)
    "device": lab_args.text("cpu, cuda or cuda:N", r"cpu|cuda(:[0-9]+)?"),
    "nthread": lab_args.number(integer(0)),  # (the task's mujoco.nthread: 0, one per CPU)
    "torch_threads": lab_args.number(integer(1)), "raw": lab_args.flag(),
    "block": lab_args.number(integer(1)),
}


def bench_sim(args: Dict[str, Any]) -> Dict[str, Any]:
    import torch

    from isaac_ppo.envs import make
    from isaac_ppo.envs.make import resolve_sim

    torch.set_num_threads(args["torch_threads"])
    mujoco = dict(args.get("mujoco") or {})  # (task.mujoco overrides: a script's, e.g. another physics)
    if args["nthread"] is not None:
        mujoco["nthread"] = args["nthread"]
    overrides = dict(args.get("task_overrides") or {})  # (a script's overrides of the task's config, e.g. env)
    if mujoco:
        overrides["mujoco"] = mujoco
    backend = resolve_sim(args["sim"], args["device"])
    env = make(args["task"], args["num_envs"], sim=backend, seed=args["seed"], device=args["device"], **overrides)
    n, steps, block = env.num_envs, args["steps"], args["block"]
    generator = torch.Generator().manual_seed(args["seed"])
    actions = [
        (torch.rand(n, env.num_actions, generator=generator) * 2 - 1).to(env.device) for _ in range(16)
    ]
    raw = RAW.get(backend)
    raw = raw(env) if args["raw"] and raw is not None else None

    env.reset()
    for i in range(block):  # warm-up: first resets, allocator, thread pool
        env.step(actions[i % 16])
        if raw is not None:
            raw.run(actions[:1])
    env_time = raw_time = 0.0
    resets = torch.zeros((), dtype=torch.long, device=env.device)
    diverged = 0
    for start in range(0, steps, block):
        count = min(block, steps - start)
        _synchronize(env.device)
        t0 = time.perf_counter()
        for i in range(start, start + count):
            _, _, reset, extras = env.step(actions[i % 16])
            resets += reset.sum()  # (on the device: no read back per step)
            diverged += extras.get("diverged", 0)
        _synchronize(env.device)
        env_time += time.perf_counter() - t0
        if raw is not None:
            raw_time += raw.run([actions[i % 16] for i in range(start, start + count)])
    result: Dict[str, Any] = {
        "bench": "sim", "task": args["task"], "sim": backend, "device": str(env.device), "num_envs": n,
        "steps": steps, "env_steps_per_s": round(n * steps / env_time),
        "episodes_ended": int(resets), "diverged": int(diverged),
        "diverged_per_million_steps": round(1e6 * int(diverged) / (n * steps), 3),
    }
    if raw is not None:
        raw_rate = n * steps / raw_time
        result.update(raw_steps_per_s=round(raw_rate), contract_overhead=round(raw_rate / result["env_steps_per_s"] - 1, 4),
                      substeps=env.substeps, **raw.describe())
    result["torch_threads"] = torch.get_num_threads()
    return result


def _synchronize(device: Any) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def raw_controls(env: Any, actions: List[Any]) -> List[Any]:
    """The bare simulator's controls for these actions: actions x powerScale where an action is one actuator's
    control, else the env's last controls (its set_controls' output, held)."""
    if env.num_actions == env.model.nu:
        return [a.to(env.ctrl.device) * env.power_scale for a in actions]
    return [env.ctrl.clone()] * len(actions)


class RawBatch:
    """A bare mujoco.batch.Batch of the env's model: controls in, substeps, nothing else."""

    def __init__(self, env: Any):
        from mujoco.batch import Batch

        self.env = env
        self.nthread = env.sim.batch.nthread
        self.batch = Batch(env.model, env.num_envs, self.nthread)
        self.ctrl = self.batch.bind("ctrl")

    def run(self, actions: List[Any]) -> float:
        """Step once per action tensor from the env's current states; seconds spent stepping."""
        self.batch.state[:] = self.env.sim.batch.state
        controls = [c.cpu().numpy() for c in raw_controls(self.env, actions)]
        t0 = time.perf_counter()
        for control in controls:
            self.ctrl[:] = control
            self.batch.step(None, self.env.substeps)
        return time.perf_counter() - t0

    def describe(self) -> Dict[str, Any]:
        return {"nthread": self.nthread}


class RawWarp:
    """A bare MuJoCo Warp Data of the env's model (the same buffer sizes): controls written in place, the
    substeps replayed as the recorded graph (a CUDA graph on the GPU), nothing else."""

    def __init__(self, env: Any):
        from isaac_ppo.tasks.sim.warp import WarpSim

        self.env = env
        self.sim = WarpSim(env.model, env.num_envs, (), env.cfg["mujoco"], env.sim_device)

    def run(self, actions: List[Any]) -> float:
        for mine, envs in zip(self.sim.state_rows, self.env.sim.state_rows):
            mine.copy_(envs)
        controls = [c.to(self.env.sim_device) for c in raw_controls(self.env, actions)]
        _synchronize(self.env.sim_device)
        t0 = time.perf_counter()
        for control in controls:
            self.sim.ctrl.copy_(control)
            self.sim.step(self.env.num_envs, self.env.substeps)
        _synchronize(self.env.sim_device)
        return time.perf_counter() - t0

    def describe(self) -> Dict[str, Any]:
        return {"warp_device": self.sim.wp_device}


RAW = {"mujoco": RawBatch, "mjwarp": RawWarp}
