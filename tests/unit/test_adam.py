"""PPO's CPU Adam (agent/adam.py) against torch.optim.Adam: the same parameters bit for bit, state_dicts that load
either way, and the reason it exists: a training process on the CPU never imports torch._dynamo."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from isaac_ppo.agent.adam import CpuAdam, adam


def net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ELU(), torch.nn.Linear(8, 3))


def step_both(models, optimizers, generator, lr, skip_last=False):
    """One step of each optimizer on the same gradients (drawn, not from a loss: any values); `skip_last`: the last
    parameter gets no gradient (Adam leaves it and its state alone)."""
    grads = [torch.randn(p.shape, generator=generator) * 10 ** torch.randint(-4, 2, (), generator=generator).item()
             for p in models[0].parameters()]
    for model, optimizer in zip(models, optimizers):
        optimizer.zero_grad(set_to_none=True)
        for group in optimizer.param_groups:
            group["lr"] = lr
        params = list(model.parameters())
        for p, g in zip(params[:-1] if skip_last else params, grads):
            p.grad = g.clone()
        optimizer.step()


def through_a_file(state):
    """What a checkpoint does to a state_dict (a loaded one's tensors are its own: either optimizer's load keeps the
    tensors it is given, as torch's does)"""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def assert_same(a: torch.nn.Module, b: torch.nn.Module):
    for (name, x), y in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(x, y), name


def test_its_steps_are_torch_adams_bit_for_bit_as_the_learning_rate_moves():
    ours, theirs = net(0), net(0)
    optimizers = [CpuAdam(ours.parameters(), lr=3e-4, eps=1e-8), torch.optim.Adam(theirs.parameters(), lr=3e-4,
                                                                                  eps=1e-8)]
    generator = torch.Generator().manual_seed(1)
    for k in range(40):  # the adaptive schedule's moves: x1.5 and /1.5 between steps
        step_both([ours, theirs], optimizers, generator, lr=3e-4 * 1.5 ** ((k % 7) - 3), skip_last=k < 3)
    assert_same(ours, theirs)
    mine, torchs = optimizers[0].state_dict(), optimizers[1].state_dict()
    assert mine["param_groups"] == torchs["param_groups"]  # every key torch writes, with its value
    assert mine["state"].keys() == torchs["state"].keys()
    for i, state in torchs["state"].items():
        assert mine["state"][i].keys() == state.keys()
        for key, value in state.items():
            assert torch.equal(mine["state"][i][key], value) and mine["state"][i][key].dtype == value.dtype, (i, key)
    assert torchs["state"][3]["step"].item() == 37  # the last parameter: no gradient for its first 3 steps


@pytest.mark.parametrize("direction", ["torch_to_ours", "ours_to_torch"])
def test_a_state_dict_of_either_loads_into_the_other_and_they_go_on_as_one(direction):
    """A checkpoint written before this optimizer existed (torch.optim.Adam's) resumes on it, and the reverse."""
    generator = torch.Generator().manual_seed(2)
    first, second = net(0), net(0)
    before = (torch.optim.Adam if direction == "torch_to_ours" else CpuAdam)(first.parameters(), lr=1e-3, eps=1e-8)
    for _ in range(5):
        step_both([first], [before], generator, lr=1e-3 * 1.5)
    second.load_state_dict(first.state_dict())
    after = (CpuAdam if direction == "torch_to_ours" else torch.optim.Adam)(second.parameters(), lr=7.0, eps=1.0)
    after.load_state_dict(through_a_file(before.state_dict()))
    assert after.param_groups[0]["lr"] == 1e-3 * 1.5 and after.param_groups[0]["eps"] == 1e-8  # the saved ones
    for _ in range(5):
        step_both([first, second], [before, after], generator, lr=2e-3)
    assert_same(first, second)


def test_a_state_dict_of_other_parameters_is_refused():
    optimizer = CpuAdam(net(0).parameters(), lr=1e-3, eps=1e-8)
    other = torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    with pytest.raises(ValueError, match="different number"):
        optimizer.load_state_dict(other.state_dict())


def test_ppo_takes_it_on_the_cpu_and_torchs_on_cuda():
    assert isinstance(adam(net(0).parameters(), 1e-3, 1e-8, torch.device("cpu")), CpuAdam)
    if torch.cuda.is_available():
        model = net(0).cuda()
        assert isinstance(adam(model.parameters(), 1e-3, 1e-8, torch.device("cuda")), torch.optim.Adam)


@pytest.mark.slow
def test_a_cpu_training_process_never_imports_torch_dynamo(tmp_path):
    """What the module is for: the CLI's training (collection, the PPO update with clipped gradients, diagnostics,
    evaluation, checkpoints, TensorBoard) runs without torch._dynamo, ~1 s of every run's start on 2 cores."""
    script = textwrap.dedent(f"""
        import sys
        from isaac_ppo.train import main
        try:
            main(["task=Cartpole", "sim=mujoco", "num_envs=64", "max_iterations=2", "agent.num_mini_batches=1",
                  "diagnostics.interval_iterations=1", "diagnostics.plot=false", "runs_dir={tmp_path / 'runs'}"])
        except SystemExit as stop:
            assert not stop.code, stop.code
        print("torch._dynamo imported:", "torch._dynamo" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert "] done: " in done.stdout  # it trained
    assert "torch._dynamo imported: False" in done.stdout, done.stdout
