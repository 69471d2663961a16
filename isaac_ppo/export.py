"""isaac-ppo-export: a checkpoint's deterministic policy as one self-contained ONNX or TorchScript file.

  isaac-ppo-export checkpoint=runs/Ant/<date>/checkpoints/best.pt format=onnx|torchscript [out=PATH]

The file maps the env's observation to the action the env applies, with nothing else needed:
  input  "obs"      float32 [batch, num_obs]: the observation as the env returns it (tasks/base.py has already
                    clamped it to +-task.env.clipObservations; the file clamps again, which changes nothing
                    then, so an observation computed the task's way but not yet clamped gives the same action)
  output "actions"  float32 [batch, num_actions]: the Gaussian's mean (play's policy, evaluate.mean_action),
                    clamped to +-task.env.clipActions as the env clamps every action it is given
A recurrent policy (agent.network.rnn) also takes and returns its state, one row per env:
  input  "hidden"      float32 [batch, state_size]: the actor's state (zeros at an episode's start: zero the
                       rows of envs whose episode ended, as training did with agent.zero_rnn_on_done)
  output "hidden_out"  float32 [batch, state_size]: the state to give with the next observation
(state_size: the LSTM's h then c, or the GRU's h, each layers x units, in the metadata's "state").
The batch axis is dynamic. Inside, in the model's own float32 arithmetic: the observation clamp (when
clipObservations is finite), the observation normaliser (the running mean and var of the checkpoint folded in
as constants: (obs - mean) / sqrt(var + epsilon), clamped to +-its clip, when agent.normalize_input), the actor
MLP and mean layer, the action clamp. No critic, value normaliser or log-std, and never the critic's own
observations (an asymmetric run's "states"): the policy takes the observation alone.
Metadata (METADATA_KEYS, strings): in the ONNX file's metadata_props; in the TorchScript file as the JSON of
the same keys in the extra file "metadata.json" (torch.jit.load(path, _extra_files={"metadata.json": ""})).

The network is rebuilt from the run's config the checkpoint holds (else its run's config.yaml, beside
checkpoints/), as play builds it. The file is written to a temporary name and renamed; bad input (a missing checkpoint or config.yaml, an
unknown format or key) is one line on stderr, exit status 2, and writes nothing.
"""
from __future__ import annotations

import io
import json
import math
import os
import sys
import warnings
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

from isaac_ppo.errors import UserError

PROG = "isaac-ppo-export"
USAGE = (f"usage: {PROG} checkpoint=PATH format=onnx|torchscript [out=PATH]\n"
         "  writes the checkpoint's deterministic policy (input \"obs\" float32 [batch, num_obs], output \"actions\" "
         "float32 [batch, num_actions]);\n  out defaults to the checkpoint's name with .onnx or .torchscript.pt")
FORMATS = {"onnx": ".onnx", "torchscript": ".torchscript.pt"}
INPUT_NAME, OUTPUT_NAME = "obs", "actions"
OPSET = 13  # what torch 1.10 (the Isaac Gym image) exports and every onnxruntime since 1.7 runs
STATE_INPUT, STATE_OUTPUT = "hidden", "hidden_out"  # (a recurrent policy's)
METADATA_KEYS = ("format_version", "task", "num_obs", "num_actions", "input", "output", "state", "state_size",
                 "clip_observations",
                 "clip_actions", "obs_normalizer", "checkpoint", "iterations", "env_steps", "config")
FORMAT_VERSION = "isaac-ppo-policy-1"


def arguments() -> Dict[str, Any]:
    """The command's own keys and their domains (isaac_ppo/lab/args.py checks them before anything is loaded)."""
    from isaac_ppo.lab import args

    return {"checkpoint": args.existing_file("an existing .pt file: a run's checkpoints/best.pt, last.pt or "
                                             "iter_*.pt"),
            "format": args.one_of(*FORMATS), "out": args.out_file()}


class DeterministicPolicy(nn.Module):
    """The env's observation -> the action the env applies, as ActorCritic.forward computes the mean."""

    def __init__(self, model: Any, clip_observations: float, clip_actions: float):
        super().__init__()
        norm = model.obs_norm
        num_obs = model.num_obs
        self.normalize = norm is not None
        # the constants normalize() derives from the float64 statistics, derived the same way
        mean = norm.mean.to(torch.float32) if norm is not None else torch.zeros(num_obs)
        std = torch.sqrt(norm.var + norm.epsilon).to(torch.float32) if norm is not None else torch.ones(num_obs)
        self.register_buffer("obs_mean", mean.detach().clone())
        self.register_buffer("obs_std", std.detach().clone())
        self.norm_clip = float(norm.clip) if norm is not None else math.inf
        self.clip_observations = float(clip_observations)
        self.clip_actions = float(clip_actions)
        self.actor_body = model.actor_body
        self.mu = model.mu

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self._clip_actions(self.mu(self.actor_body(self._input(obs))))

    def _input(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs
        if self.clip_observations < math.inf:
            x = x.clamp(-self.clip_observations, self.clip_observations)
        if self.normalize:
            x = (x - self.obs_mean) / self.obs_std
            if self.norm_clip < math.inf:
                x = x.clamp(-self.norm_clip, self.norm_clip)
        return x

    def _clip_actions(self, actions: torch.Tensor) -> torch.Tensor:
        if self.clip_actions < math.inf:
            actions = actions.clamp(-self.clip_actions, self.clip_actions)
        return actions


class RecurrentPolicy(DeterministicPolicy):
    """(observation, the actor's state) -> (action, next state), as ActorCritic.step computes the mean."""

    def __init__(self, model: Any, clip_observations: float, clip_actions: float):
        super().__init__(model, clip_observations, clip_actions)
        self.rnn = model.actor_rnn
        self.before_mlp, self.concat_input = bool(self.rnn.before_mlp), bool(self.rnn.concat_input)

    def forward(self, obs: torch.Tensor, hidden: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:  # type: ignore
        x = self._input(obs)
        if self.before_mlp:
            out, hidden = self.rnn(x, hidden)
            features = self.actor_body(out)
        else:
            features = self.actor_body(x)
            if self.concat_input:
                features = torch.cat((features, x), dim=1)
            features, hidden = self.rnn(features, hidden)
        return self._clip_actions(self.mu(features)), hidden


def parse_args(argv: List[str]) -> Dict[str, str]:
    """checkpoint=, format= and out= from key=value words; anything else is a one-line UserError."""
    from isaac_ppo.lab.args import parse  # (the lab's one way to read KEY=VALUE words)

    args: Dict[str, str] = parse(argv, arguments(), f"{PROG} checkpoint=PATH format=onnx|torchscript [out=PATH]").own
    if "checkpoint" not in args:
        raise UserError("checkpoint=PATH is required: the .pt file to export (best.pt, last.pt or iter_*.pt)")
    if "format" not in args:
        raise UserError("format= is required: give format=onnx or format=torchscript")
    return args


def run_config(checkpoint_path: str, state: Dict[str, Any]) -> Any:
    """(where, text, config) of the checkpoint's run's resolved config: the one the checkpoint holds (every
    checkpoint saves it), else <run_dir>/config.yaml, run_dir holding checkpoints/."""
    from omegaconf import OmegaConf

    if isinstance(state.get("config"), str):
        return checkpoint_path, state["config"], OmegaConf.create(state["config"])
    run_dir = os.path.dirname(os.path.dirname(os.path.abspath(checkpoint_path)))
    path = os.path.join(run_dir, "config.yaml")
    if not os.path.isfile(path):
        raise UserError(f"no config.yaml in {run_dir}, the run folder of {checkpoint_path}: export a checkpoint "
                        "from inside its run folder (<run_dir>/checkpoints/), where the run wrote config.yaml")
    try:
        with open(path) as f:
            text = f.read()
        return path, text, OmegaConf.create(text)
    except Exception as error:
        raise UserError(f"{path} cannot be read ({type(error).__name__}): not a run's config.yaml") from None


def build_policy(checkpoint_path: str) -> Any:
    """(DeterministicPolicy, metadata) of a checkpoint, the model rebuilt and loaded as play does it."""
    from omegaconf import OmegaConf

    from isaac_ppo.loop.build import build_model
    from isaac_ppo.io import checkpoint

    state = checkpoint.load(checkpoint_path, "cpu")
    config_path, config_text, cfg = run_config(checkpoint_path, state)
    task = OmegaConf.select(cfg, "task.name")
    if task != state["task"]:
        raise UserError(f"{config_path} is a run of {task}, the checkpoint {checkpoint_path} of {state['task']}: "
                        "export a checkpoint from inside its own run folder")
    # (a critic over the env's critic observations is rebuilt to load the checkpoint; the policy leaves it out)
    shapes = SimpleNamespace(num_obs=int(state["num_obs"]), num_actions=int(state["num_actions"]),
                             num_states=int(state.get("num_states", 0)))
    try:
        model = build_model(cfg, shapes, torch.device("cpu"))
        env = cfg.task.env
        clip_observations = float(env.get("clipObservations", math.inf))  # tasks/base.py's defaults
        clip_actions = float(env.get("clipActions", 1.0))
    except (AttributeError, KeyError, TypeError, ValueError) as error:  # a key missing or of the wrong type
        raise UserError(f"{config_path} cannot rebuild the network ({type(error).__name__}: "
                        f"{str(error).splitlines()[0]})") from None
    checkpoint.load_model(model, state, checkpoint_path)
    model.eval()
    kind = RecurrentPolicy if model.recurrent else DeterministicPolicy
    policy = kind(model, clip_observations, clip_actions).eval().requires_grad_(False)
    norm = model.obs_norm
    counters = state.get("counters", {})
    metadata = {
        "format_version": FORMAT_VERSION,
        "task": str(state["task"]),
        "num_obs": str(shapes.num_obs),
        "num_actions": str(shapes.num_actions),
        "input": f"{INPUT_NAME}: float32 [batch, {shapes.num_obs}], the env's observation" + (
            f" (clamped to +-{clip_observations} here as the env clamps it)"
            if math.isfinite(clip_observations) else ""),
        "output": f"{OUTPUT_NAME}: float32 [batch, {shapes.num_actions}], the mean action" + (
            f" clamped to +-{clip_actions} as the env clamps it" if math.isfinite(clip_actions) else ""),
        "state": (f"{STATE_INPUT} -> {STATE_OUTPUT}: float32 [batch, {model.actor_state}], the actor's "
                  f"{'LSTM h then c' if model.actor_rnn.parts == 2 else 'GRU h'} ({model.actor_rnn.layers} x "
                  f"{model.actor_rnn.units} each); zeros at an episode's start"
                  if model.recurrent else "none (feed-forward)"),
        "state_size": str(model.actor_state),
        "clip_observations": str(clip_observations),
        "clip_actions": str(clip_actions),
        "obs_normalizer": (f"(obs - mean) / sqrt(var + {norm.epsilon}) clamped to +-{norm.clip}, folded in"
                           if norm is not None else "none (agent.normalize_input=false)"),
        "checkpoint": os.path.abspath(checkpoint_path),
        "iterations": str(counters.get("iteration", "")),
        "env_steps": str(counters.get("env_steps", "")),
        "config": config_text,
    }
    return policy, metadata


def onnx_bytes(policy: nn.Module, metadata: Dict[str, str], num_obs: int) -> bytes:
    """The policy as an ONNX model (torch's TorchScript-based exporter: no onnxscript needed), metadata added; a
    recurrent one with its state as a second input and output."""
    import inspect

    import onnx

    options: Dict[str, Any] = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:  # torch >= 2.5; its default is True from 2.9
        options["dynamo"] = False
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch >= 2.9 deprecates this exporter; the dynamo one needs onnxscript
        inputs, outputs = [INPUT_NAME], [OUTPUT_NAME]
        example: Tuple[torch.Tensor, ...] = (torch.zeros(1, num_obs),)
        state_size = int(metadata["state_size"])
        if state_size:
            inputs, outputs = inputs + [STATE_INPUT], outputs + [STATE_OUTPUT]
            example += (torch.zeros(1, state_size),)
        torch.onnx.export(policy, example, buffer, input_names=inputs, output_names=outputs, opset_version=OPSET,
                          do_constant_folding=True, dynamic_axes={name: {0: "batch"} for name in inputs + outputs},
                          **options)
    proto = onnx.load_from_string(buffer.getvalue())
    for key in METADATA_KEYS:
        proto.metadata_props.add(key=key, value=metadata[key])
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


def torchscript_bytes(policy: nn.Module, metadata: Dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # recent torch deprecates torch.jit; it still works
        scripted = torch.jit.script(policy)
        torch.jit.save(scripted, buffer, _extra_files={"metadata.json": json.dumps(metadata, indent=1)})
    return buffer.getvalue()


def export(checkpoint_path: str, fmt: str, out: Optional[str] = None) -> Dict[str, Any]:
    """Write the checkpoint's policy in format fmt to out (default: beside the checkpoint); what was written."""
    if fmt == "onnx":
        try:
            import onnx  # noqa: F401 (checked before anything is loaded or written)
        except ImportError:
            raise UserError("format=onnx needs the onnx package: pip install 'isaac-ppo[export]'") from None
    if not os.path.isfile(checkpoint_path):
        raise UserError(f"checkpoint not found: {checkpoint_path} (give checkpoint= an existing .pt file: a run's "
                        "checkpoints/best.pt, last.pt or iter_*.pt)")
    out = out or os.path.splitext(checkpoint_path)[0] + FORMATS[fmt]
    if os.path.abspath(out) == os.path.abspath(checkpoint_path):
        raise UserError(f"out={out} is the checkpoint itself: give another file")
    policy, metadata = build_policy(checkpoint_path)
    num_obs = int(metadata["num_obs"])
    data = onnx_bytes(policy, metadata, num_obs) if fmt == "onnx" else torchscript_bytes(policy, metadata)
    tmp = out + ".tmp"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, out)
    except OSError as error:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise UserError(f"cannot write {out}: {error.strerror or error}") from None
    return {"out": out, "format": fmt, "bytes": len(data), **{k: metadata[k] for k in ("task", "num_obs",
                                                                                        "num_actions", "iterations",
                                                                                        "state_size")}}


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(word in ("-h", "--help") for word in argv):
        print(USAGE)
        return 0
    try:
        args = parse_args(argv)
        result = export(args["checkpoint"], args["format"], args.get("out"))
    except UserError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    print(f"[{result['task']}] {result['format']} policy of {args['checkpoint']} (after {result['iterations']} "
          f"iterations): {result['out']} ({result['bytes']:,} bytes; input \"{INPUT_NAME}\" float32 "
          f"[batch, {result['num_obs']}], output \"{OUTPUT_NAME}\" float32 [batch, {result['num_actions']}]"
          + (f"; state \"{STATE_INPUT}\" -> \"{STATE_OUTPUT}\" float32 [batch, {result['state_size']}]"
             if int(result["state_size"]) else "") + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
