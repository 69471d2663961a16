"""Does dormancy move in a real run? Each checkpoint of a run, measured on one fixed set of states.

    python benchmarks/dormancy_check.py RUN_DIR

The states: a probe set played by the run's last checkpoint (64 envs from reset, 2048 observations, seed 0,
as `save_probe_set` makes it). On them, for the untrained network (the run's seed) and every checkpoint of the
run (iter_*.pt, last.pt), the fraction of hidden units (pooled over layers) that are:
- dormant by Sokar et al.'s score, mean|h_i| / layer mean <= 0.025 (the `dormant_fraction` the package logs);
- of std < 1e-3 over the states (the absolute `low_std_fraction` the package logged before issue 17);
- of std <= tau x their layer's mean unit std, tau = 0.025 (today's `low_std_fraction`), 0.1 and 0.25.
The last line printed is one JSON object.
"""
from __future__ import annotations

import glob
import json
import os
import sys

import torch
from omegaconf import OmegaConf

from isaac_ppo.loop.build import build_model
from isaac_ppo.diagnostics.metrics import dormant_fraction
from isaac_ppo.diagnostics.probe import _capture
from isaac_ppo.diagnostics.probe_set import StateSampler
from isaac_ppo.envs import make
from isaac_ppo.loop.evaluate import first_episodes, mean_action
from isaac_ppo.io import checkpoint

TAUS = (0.025, 0.1, 0.25)


def fractions(model, states):
    layers = _capture(model, states)
    named = {f"{net}.{i}": h for net, hs in layers.items() for i, h in enumerate(hs)}
    units = sum(h.shape[1] for h in named.values())
    absolute = sum(int((h.std(dim=0, unbiased=False) < 1e-3).sum()) for h in named.values()) / units
    out = {"dormant_sokar_0.025": dormant_fraction(named, 0.025)["pooled"], "low_std_below_1e-3": absolute}
    for tau in TAUS:
        out[f"low_std_relative_{tau}"] = dormant_fraction(named, tau)["low_std_pooled"]
    return out


def main(run_dir):
    cfg = OmegaConf.load(os.path.join(run_dir, "config.yaml"))
    task_cfg = OmegaConf.to_container(cfg.task, resolve=True)
    env = make(cfg.task.name, 64, sim="mujoco", seed=0, task_cfg=task_cfg)
    last = os.path.join(run_dir, "checkpoints", "last.pt")
    model = build_model(cfg, env, torch.device("cpu"))
    checkpoint.load_model(model, checkpoint.load(last), last)
    sampler = StateSampler(mean_action(model), 2048, seed=0)
    with torch.no_grad():
        first_episodes(env, sampler)
    states = sampler.sample()
    results = []
    torch.manual_seed(cfg.seed)  # the run's initial network (build_runner seeds the same way, rank 0)
    initial = build_model(cfg, env, torch.device("cpu"))
    paths = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "iter_*.pt"))) + [last]
    for name, net in [("initial", initial)] + [(os.path.basename(p), None) for p in paths]:
        if net is None:
            net = build_model(cfg, env, torch.device("cpu"))
            path = os.path.join(run_dir, "checkpoints", name)
            state = checkpoint.load(path)
            checkpoint.load_model(net, state, path)
            name = f"{name} (iteration {state['counters']['iteration']})"
        with torch.no_grad():
            row = dict(checkpoint=name, **fractions(net, states))
        results.append(row)
        print("  ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{v}" for k, v in row.items()), flush=True)
    print(json.dumps({"bench": "dormancy_check", "run_dir": run_dir, "states": int(states.shape[0]),
                      "results": results}))


if __name__ == "__main__":
    main(sys.argv[1])
