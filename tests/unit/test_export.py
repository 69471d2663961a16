"""isaac-ppo-export: the ONNX and TorchScript files compute what the checkpoint's own model computes (the env's
clamps included), on observations near and far outside the normaliser's range; their metadata reads back; the
console script writes the file, and refuses bad input in one line with exit status 2, writing nothing."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import torch

from helpers import train_in_process
from isaac_ppo import export
from isaac_ppo.loop.build import build_model
from isaac_ppo.io import checkpoint
from isaac_ppo.io.checkpoint import Checkpointer
from isaac_ppo.io.logger import write_config
from isaac_ppo.config.compose import compose_config

onnx = pytest.importorskip("onnx", reason="onnx is a test dependency: pip install '.[test]'")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is a test dependency: pip install '.[test]'")

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")  # (torch >= 2.11 deprecates jit)

TOLERANCE = 1e-5
SCRIPT = Path(sys.executable).with_name("isaac-ppo-export")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> str:
    """A real run's folder: 2 iterations of Cartpole (best.pt from the training return, last.pt, config.yaml)."""
    runs = tmp_path_factory.mktemp("runs")
    return train_in_process(runs, "task=Cartpole", "num_envs=64", "agent.minibatch_size=256", "sim=mujoco",
                            "max_iterations=2", "eval.interval_env_steps=0", "eval.final=false", "diagnostics.enabled=false",
                            "diagnostics.plot=false").run_dir


def hand_made(run_dir: Path, overrides: List[str], num_obs: int, num_actions: int) -> str:
    """best.pt of a network built from overrides, saved by the package's own Checkpointer beside its
    config.yaml, with random weights and a normaliser whose mean and var are away from 0 and 1."""
    cfg = compose_config(overrides)
    write_config(str(run_dir), cfg)
    torch.manual_seed(3)
    model = build_model(cfg, SimpleNamespace(num_obs=num_obs, num_actions=num_actions), torch.device("cpu"))
    with torch.no_grad():  # torch's initialisation, biases made non-zero, larger means (some get clamped)
        for p in model.parameters():
            p.add_(torch.randn(p.shape) * 0.05)
        model.mu.weight.mul_(3.0)
        if model.obs_norm is not None:
            # (within Cartpole's clipObservations 5: the env's observations are)
            model.obs_norm.mean.copy_((torch.randn(num_obs, dtype=torch.float64) * 1.5).clamp(-2.5, 2.5))
            model.obs_norm.var.copy_(torch.rand(num_obs, dtype=torch.float64) * 4 + 1e-3)
            model.obs_norm.count.fill_(12345.0)
    from omegaconf import OmegaConf

    state = {"model": model.state_dict(), "task": cfg.task.name, "num_obs": num_obs, "num_actions": num_actions,
             "config": OmegaConf.to_yaml(cfg, resolve=True),
             "counters": {"iteration": 7, "env_steps": 7000, "wall_s": 1.0}}
    return Checkpointer(str(run_dir), save_interval_iterations=1).save("best.pt", state)


def reference(path: str) -> Tuple[Any, Dict[str, float]]:
    """The checkpoint's model, built from its config.yaml and loaded with checkpoint.load_model as play does,
    and the env's clamps (tasks/base.py: clipObservations default inf, clipActions default 1)."""
    from omegaconf import OmegaConf

    state = checkpoint.load(path)
    cfg = OmegaConf.load(os.path.join(os.path.dirname(os.path.dirname(path)), "config.yaml"))
    model = build_model(cfg, SimpleNamespace(num_obs=state["num_obs"], num_actions=state["num_actions"]),
                        torch.device("cpu"))
    checkpoint.load_model(model, state, path)
    env = cfg.task.env
    return model.eval(), {"obs": float(env.get("clipObservations", math.inf)),
                          "actions": float(env.get("clipActions", 1.0))}


def observations(model: Any, num_obs: int, clip_obs: float) -> torch.Tensor:
    """Typical observations (about the normaliser's mean and spread, within the env's clamp), and where the
    normaliser or the observation clamp bounds what the MLP sees, values far outside its range and extremes;
    float32. (With neither, a huge observation reaches the MLP as it is and float32 rounding alone tells two
    runtimes apart.)"""
    g = torch.Generator().manual_seed(0)
    if model.obs_norm is not None:
        mean, std = model.obs_norm.mean.float(), model.obs_norm.var.sqrt().float()
    else:
        mean, std = torch.zeros(num_obs), torch.ones(num_obs)
    typical = mean + std * torch.randn(256, num_obs, generator=g)
    if math.isfinite(clip_obs):  # as the env returns them
        typical = typical.clamp(-clip_obs, clip_obs)
    if model.obs_norm is None and not math.isfinite(clip_obs):
        return typical
    far = mean + std * 1e3 * torch.randn(256, num_obs, generator=g)
    extreme = torch.tensor([0.0, 1e6, -1e6, 3e38, -3e38]).repeat_interleave(num_obs).reshape(5, num_obs)
    return torch.cat([typical, far, torch.randn(64, num_obs, generator=g) * 1e4, extreme])


def run_onnx(path: str, obs: torch.Tensor) -> torch.Tensor:
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return torch.from_numpy(session.run(["actions"], {"obs": obs.numpy()})[0])


def run_torchscript(path: str, obs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.jit.load(path)(obs)


RUNNERS = {"onnx": run_onnx, "torchscript": run_torchscript}


def check_parity(path: str, fmt: str, out: str) -> Dict[str, int]:
    """Export path to out and compare the file's actions with the model's; how many observations and actions
    the env's clamps changed."""
    result = export.export(path, fmt, out)
    assert result["out"] == out and os.path.isfile(out)
    model, clip = reference(path)
    obs = observations(model, model.actor_body[0].in_features, clip["obs"])
    with torch.no_grad():
        clipped = obs.clamp(-clip["obs"], clip["obs"]) if math.isfinite(clip["obs"]) else obs
        expected = model(clipped)[0].clamp(-clip["actions"], clip["actions"])
        raw = model(obs)[0]
    got = RUNNERS[fmt](out, obs)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    diff = (got - expected).abs().max().item()
    assert diff < TOLERANCE, f"{fmt}: max abs diff {diff:.3g} from the model's forward (env clamps applied)"
    # where neither of the env's clamps acts, the file is the model's forward itself
    untouched = (obs.abs() <= clip["obs"]).all(-1) & (raw.abs() < clip["actions"]).all(-1)
    assert untouched.sum() >= 32, "too few observations that no clamp touches"
    plain = (got[untouched] - raw[untouched]).abs().max().item()
    assert plain < TOLERANCE, f"{fmt}: max abs diff {plain:.3g} from model(obs)[0] where no clamp acts"
    clamped = {"obs": int((clipped != obs).any(-1).sum()), "actions": int((raw.abs() > clip["actions"]).any(-1).sum())}
    print(f"{fmt} {path}: max abs diff {diff:.3g} on {len(obs)} obs ({clamped['obs']} clamped, {clamped['actions']} "
          f"actions clamped), {plain:.3g} from model(obs)[0] on the {int(untouched.sum())} no clamp touches")
    return clamped


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("name", ["best.pt", "last.pt"])
def test_a_trained_checkpoint_exports_with_parity(trained, tmp_path, fmt, name):
    check_parity(os.path.join(trained, "checkpoints", name), fmt, str(tmp_path / f"policy.{fmt}"))


NETWORKS = {  # Ant: clipObservations unset (no observation clamp); tanh, separate critic; no input normaliser
    "ant_separate_tanh": (["task=Ant", "agent.network.separate=true", "agent.network.activation=tanh"], 60, 8),
    "humanoid_unnormalised": (["task=Humanoid", "agent.normalize_input=false", "agent.network.hidden=[32,16]"],
                              108, 21),
    "cartpole_relu": (["task=Cartpole", "agent.network.activation=relu", "agent.network.hidden=[8]"], 4, 1),
}


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_other_networks_export_with_parity(tmp_path, fmt, network):
    overrides, num_obs, num_actions = NETWORKS[network]
    path = hand_made(tmp_path / network, overrides, num_obs, num_actions)
    clamped = check_parity(path, fmt, str(tmp_path / f"policy.{fmt}"))
    assert clamped["actions"] > 0, "the action clamp was never exercised"
    assert clamped["obs"] > 0 or network != "cartpole_relu", "Cartpole's observation clamp was never exercised"


def expected_metadata(path: str) -> Dict[str, str]:
    state = checkpoint.load(path)
    config = Path(os.path.dirname(os.path.dirname(path)), "config.yaml").read_text()
    return {"task": "Cartpole", "num_obs": "4", "num_actions": "1", "clip_observations": "5.0",
            "clip_actions": "1.0", "checkpoint": os.path.abspath(path),
            "iterations": str(state["counters"]["iteration"]), "env_steps": str(state["counters"]["env_steps"]),
            "config": config, "format_version": export.FORMAT_VERSION}


def test_onnx_names_shapes_and_metadata(trained, tmp_path):
    path = os.path.join(trained, "checkpoints", "best.pt")
    out = str(tmp_path / "p.onnx")
    export.export(path, "onnx", out)
    session = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    (inp,), (outp,) = session.get_inputs(), session.get_outputs()
    assert (inp.name, inp.type, inp.shape) == ("obs", "tensor(float)", ["batch", 4])
    assert (outp.name, outp.type, outp.shape) == ("actions", "tensor(float)", ["batch", 1])
    for batch in (1, 5):  # the batch axis is dynamic
        assert session.run(None, {"obs": np.zeros((batch, 4), np.float32)})[0].shape == (batch, 1)
    props = {p.key: p.value for p in onnx.load(out).metadata_props}
    assert set(props) == set(export.METADATA_KEYS)
    assert session.get_modelmeta().custom_metadata_map == props
    expected = expected_metadata(path)
    assert {k: props[k] for k in expected} == expected
    assert "1e-05" in props["obs_normalizer"] and "5.0" in props["obs_normalizer"], props["obs_normalizer"]
    assert props["iterations"] == "2" and int(props["env_steps"]) > 0


def test_torchscript_metadata(trained, tmp_path):
    path = os.path.join(trained, "checkpoints", "last.pt")
    out = str(tmp_path / "p.pt")
    export.export(path, "torchscript", out)
    files = {"metadata.json": ""}
    module = torch.jit.load(out, _extra_files=files)
    metadata = json.loads(files["metadata.json"])
    assert set(metadata) == set(export.METADATA_KEYS)
    expected = expected_metadata(path)
    assert {k: metadata[k] for k in expected} == expected
    for batch in (1, 5):
        assert module(torch.zeros(batch, 4)).shape == (batch, 1)


def files_under(folder: str) -> List[str]:
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


def run_script(*args: str) -> subprocess.CompletedProcess:
    assert SCRIPT.is_file(), f"{SCRIPT} missing: pip install -e '.[test]' installs the console script"
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_the_console_script_writes_the_file_and_refuses_bad_input(trained):
    best = os.path.join(trained, "checkpoints", "best.pt")
    before = files_under(trained)
    for args, named in [((f"checkpoint={trained}/checkpoints/nothing.pt", "format=onnx"), "nothing.pt"),
                        ((f"checkpoint={best}", "format=tflite"), "format='tflite'")]:
        result = run_script(*args)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("isaac-ppo-export: "), result.stderr
        assert named in result.stderr and "Traceback" not in result.stderr
        assert files_under(trained) == before, "a refused export wrote something"
    result = run_script(f"checkpoint={best}", "format=onnx")
    assert result.returncode == 0, result.stderr
    written = os.path.join(trained, "checkpoints", "best.onnx")
    assert os.path.isfile(written) and written in result.stdout
    assert files_under(trained) == sorted(before + ["checkpoints/best.onnx"])
    assert run_onnx(written, torch.zeros(2, 4)).shape == (2, 1)


def test_more_refusals_in_one_line_writing_nothing(trained, tmp_path, capsys):
    best = os.path.join(trained, "checkpoints", "best.pt")
    orphan = tmp_path / "elsewhere" / "checkpoints"
    orphan.mkdir(parents=True)
    (orphan / "best.pt").write_bytes(Path(best).read_bytes())
    cases = [
        ([f"checkpoint={best}"], "format= is required"),
        (["format=onnx"], "checkpoint=PATH is required"),
        ([f"checkpoint={best}", "format=onnx", "device=cuda"], "unknown argument 'device=cuda'"),
        ([f"checkpoint={best}", "format=onnx", f"out={best}"], "is the checkpoint itself"),
        ([f"checkpoint={trained}/config.yaml", "format=onnx"], "cannot be read"),
    ]
    before = files_under(str(tmp_path)), files_under(trained)
    for argv, named in cases:
        assert export.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("isaac-ppo-export: ") and named in err, (argv, err)
    assert (files_under(str(tmp_path)), files_under(trained)) == before
    # a checkpoint moved out of its run folder holds its run's config: it exports all the same
    assert export.main([f"checkpoint={orphan}/best.pt", "format=onnx"]) == 0
    assert run_onnx(str(orphan / "best.onnx"), torch.zeros(2, 4)).shape == (2, 1)
    capsys.readouterr()
    assert export.main(["--help"]) == 0 and "format=onnx|torchscript" in capsys.readouterr().out
