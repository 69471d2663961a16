"""The pieces of the 2-ranks-vs-1 equivalence test (tests/integration/test_distributed.py) that its spawned
rank processes import: a top-level module on the tests' pythonpath, importable from a fresh interpreter (the
test module itself is not, under pytest's importlib mode)."""
from __future__ import annotations

import os

import torch

from helpers import synthetic_buffer
from isaac_ppo.agent.model import ActorCritic
from isaac_ppo.agent.ppo import PPO
from isaac_ppo.agent.rollout import RolloutBuffer
from isaac_ppo.scheduler import Plan

ENVS, STEPS, OBS, ACTIONS = 8, 16, 5, 2
PPO_CFG = {
    "learning_rate": 3e-4, "lr_schedule": "adaptive", "kl_threshold": 0.008, "clip": 0.2, "clip_value": True,
    "critic_coef": 2.0, "entropy_coef": 0.0, "bounds_loss_coef": 1e-4, "truncate_grads": True, "grad_norm": 1.0,
    "normalize_advantage": True, "mixed_precision": False, "stale_correction": "none", "stale_update": "current",
    "stale_clip": "behaviour",
}


class InOrderPPO(PPO):
    """Minibatches in storage order (time-major), so that minibatch j of 1 rank x 2E envs is exactly the union of
    minibatch j of each of 2 ranks x E envs: the same data, the same partition."""

    def permutation(self, n):
        return torch.arange(n)


def new_model():
    torch.manual_seed(0)
    return ActorCritic(OBS, ACTIONS, [32, 32], "elu", False, 0.0, True, True)


def slice_envs(buffer, first, count):
    part = RolloutBuffer(STEPS, count, OBS, ACTIONS, torch.device("cpu"))
    for name in ("obs", "actions", "log_probs", "mu", "values", "rewards", "dones", "advantages", "returns"):
        getattr(part, name).copy_(getattr(buffer, name)[:, first:first + count])
    part.log_std.copy_(buffer.log_std)
    return part


def learn(ppo, buffer, num_envs):
    """The update; returns the gradients of its first step as the optimizer saw them (after the all-reduce)."""
    first = []

    def keep_first(model):
        if not first:
            first.append({name: p.grad.clone() for name, p in model.named_parameters()})

    ppo.grad_observer = keep_first
    plan = Plan(num_envs=num_envs, rollout_length=STEPS, epochs=2, minibatch_size=num_envs * STEPS // 4)
    ppo.update(buffer, plan)
    return first[0]


def rank_process(rank, port, out):
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    from isaac_ppo.distributed import TorchDistributed

    comm = TorchDistributed("gloo", torch.device("cpu"))
    model = new_model()
    comm.broadcast_module(model)
    buffer = slice_envs(synthetic_buffer(new_model(), STEPS, 2 * ENVS), rank * ENVS, ENVS)
    ppo = InOrderPPO(model, PPO_CFG, torch.device("cpu"), torch.Generator(), comm)
    grads = learn(ppo, buffer, ENVS)
    model.obs_norm.update(buffer.obs.view(-1, OBS), comm.merge_moments)
    model.value_norm.update(buffer.returns.view(-1, 1), comm.merge_moments)
    torch.save({"model": model.state_dict(), "lr": ppo.lr, "grads": grads}, f"{out}.{rank}")
    comm.close()
