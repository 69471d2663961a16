"""Helpers shared by tests (on sys.path through pytest's `pythonpath`)."""
from __future__ import annotations

import contextlib
import glob
import io
import json
import math
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Optional

import numpy as np
import pytest
import torch

from isaac_ppo.agent.model import ActorCritic, gaussian_log_prob
from isaac_ppo.agent.rollout import RolloutBuffer


# every test that steps MuJoCo Warp on the CPU, in process or in a subprocess, takes this one xdist worker
# (pyproject.toml's --dist loadgroup): Warp's kernel cache is then filled once per machine, not by two workers at
# once (a cold CI compiled it twice, 42 s and 36 s, when the kit's dry runs were on the other worker, 2026-12-02)
MJWARP_WORKER = pytest.mark.xdist_group("mjwarp")
# the one task the contract and equivalence suites run on MuJoCo Warp by default (no contacts); every other
# registered task runs there with --mjwarp-all-models (tests/conftest.py)
MJWARP_DEFAULT_TASK = "Cartpole"
# every model whose MuJoCo Warp kernels the default suite compiles: Cartpole, and the models the randomisation
# schema's tests need on both backends (Ant's block, Ingenuity's gravity, AllegroHand's actor scale). A test of
# another task on sim=mjwarp takes mjwarp_marks(task): it runs with --mjwarp-all-models, since each model adds its
# own compile to a fresh machine's suite (benchmarks/mjwarp_compile_cost.py: 5-23 s each on 2 cores)
MJWARP_SUITE_MODELS = ("Cartpole", "Ant", "Ingenuity", "AllegroHand")


def mjwarp_marks(task: str) -> list:
    """The marks of a sim=mjwarp case of `task`: the mjwarp worker, the slow tier, and --mjwarp-all-models for a
    model the default suite does not compile."""
    return [MJWARP_WORKER, pytest.mark.slow] + ([] if task in MJWARP_SUITE_MODELS else [pytest.mark.mjwarp_models])

# CI (.ci/run) installs every system library the suite uses and sets this: a missing one fails there
REQUIRE_SYSTEM = "ISAAC_PPO_REQUIRE_SYSTEM"


def require_system(problem: Optional[str]) -> None:
    """For a test that needs something outside pip (a system library): skip with `problem` (what is missing and
    what to install) when it is absent; with ISAAC_PPO_REQUIRE_SYSTEM=1, fail instead, so that CI, which
    installs it, can never pass by skipping."""
    if problem is None:
        return
    if os.environ.get(REQUIRE_SYSTEM) == "1":
        pytest.fail(f"{problem} [{REQUIRE_SYSTEM}=1: this machine must have it]")
    pytest.skip(problem)


BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def benchmark_lines(script: str, *args: str, timeout: float = 120) -> list:
    """Run benchmarks/<script> with args; the JSON objects it printed, one a line (a failure shows its stderr)."""
    done = subprocess.run([sys.executable, os.path.join(BENCHMARKS, script), *args], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def synthetic_buffer(model: ActorCritic, rollout_length: int, num_envs: int, seed: int = 1) -> RolloutBuffer:
    """A batch of random observations and actions whose behaviour policy is `model` (its means, log-std and
    log-probs), with random values, returns and advantages."""
    num_obs, num_actions = model.actor_body[0].in_features, model.mu.out_features
    g = torch.Generator().manual_seed(seed)
    buf = RolloutBuffer(rollout_length, num_envs, num_obs, num_actions, torch.device("cpu"))
    shape = (rollout_length, num_envs)
    buf.obs.copy_(torch.randn(*shape, num_obs, generator=g))
    buf.actions.copy_(torch.randn(*shape, num_actions, generator=g))
    with torch.no_grad():
        mu, log_std, _ = model(buf.obs)
        buf.mu.copy_(mu)
        buf.log_std.copy_(model.log_std)
        buf.log_probs.copy_(gaussian_log_prob(buf.actions, mu, log_std))
    buf.values.copy_(torch.randn(*shape, generator=g))
    buf.returns.copy_(torch.randn(*shape, generator=g))
    buf.advantages.copy_(torch.randn(*shape, generator=g))
    return buf


def train_in_process(runs_dir: str, *overrides: str) -> SimpleNamespace:
    """isaac-ppo-train OVERRIDES in this process: the CLI's own composition and run(), each run in the next
    folder (000, 001, ...) of its experiment. For tests about what a run does, not about the process (exit
    status, signals): a training process spends ~9 s importing torch, its optimizer's dynamo and Hydra.
    Returns the run's folder, its console output and its summary; a refusal raises UserError."""
    from isaac_ppo.config.compose import compose_config
    from isaac_ppo.train import run

    cfg = compose_config([f"runs_dir={runs_dir}", *overrides])
    experiment = os.path.join(str(runs_dir), cfg.experiment or cfg.task.name)
    run_dir = os.path.join(experiment, f"{len(glob.glob(os.path.join(experiment, '*'))):03d}")
    os.makedirs(os.path.join(run_dir, ".hydra"))
    with open(os.path.join(run_dir, ".hydra", "overrides.yaml"), "w") as f:  # Hydra's record (the report reads it)
        f.write("".join(f"- {override}\n" for override in overrides))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        summary = run(cfg, run_dir=run_dir)
    return SimpleNamespace(run_dir=run_dir, stdout=out.getvalue(), summary=summary)


# a body's orientation for semantics tests with known answers (MuJoCo's quaternion order: w, x, y, z)
def quat_about(axis, angle):
    axis = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    return np.concatenate(([math.cos(angle / 2)], math.sin(angle / 2) * axis))


def rotation_matrix(q):
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


# BallBalance (issue 47): the masses of its model and a ball at rest on its tray, for its semantics tests on either
# simulator (tests/integration/test_ball_balance.py, test_mjwarp.py)
G = 9.81
TRAY_MASS = math.pi * 0.5 ** 2 * 0.02 * 100  # cylinder r 0.5 m, 0.02 m thick, density 100
BALL_MASS = 4.0 / 3.0 * math.pi * 0.1 ** 3 * 200  # sphere r 0.1 m, density 200
TRAY_AND_BALL_WEIGHT = (TRAY_MASS + BALL_MASS) * G
TRAY_TOP = 0.559117 + 0.01


def rest_the_ball_on_the_tray(env, steps: int = 200):
    """The ball put at rest on the tray's centre, then zero actions for steps control steps: the legs' forces on the
    tray, (envs, 3, 3) in the tray's frame, on the CPU (the episodes must not end)."""
    env.reset()
    everyone = slice(0, env.num_envs)
    env.qpos[:, 13:16] = torch.tensor([0.0, 0.0, TRAY_TOP + 0.1], dtype=env.qpos.dtype, device=env.qpos.device)
    env.qvel[:, 12:18] = 0.0
    for _ in range(steps):
        _, reward, resets, extras = env.step(torch.zeros(env.num_envs, 3))
        assert not resets.any() and extras["diverged"] == 0
    assert reward.min() > 0.95  # the ball at rest 0.03 m from (0, 0, 0.7)
    return env.tray_wrenches(everyone)[0].cpu()


def one_line_error(result, *fragments):
    """A refused command: exit status 2, one line on stderr holding every fragment, no traceback."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def record_minibatches(ppo) -> list:
    """Wrap a PPO so that each minibatch of its updates is kept, in order, as a dict: its row ids, its padding mask
    (recurrent; else None), the means and log-std of its forward (log-std expanded to the means' shape) and the KL it
    handed to the step."""
    seen: list = []
    minibatches, forward, step = ppo._minibatches, ppo._forward, ppo._step

    def ids_kept(*args):
        for ids, mb in minibatches(*args):
            valid = mb.get("valid")
            seen.append({"ids": ids.clone(), "valid": None if valid is None else valid.clone()})
            yield ids, mb

    def forward_kept(mb):
        mu, log_std, value = forward(mb)
        seen[-1].update(mu=mu.detach().clone(), log_std=log_std.detach().expand_as(mu).clone())
        return mu, log_std, value

    def step_kept(loss, riders):
        seen[-1]["kl"] = float(riders[0])
        return step(loss, riders)

    ppo._minibatches, ppo._forward, ppo._step = ids_kept, forward_kept, step_kept
    return seen
