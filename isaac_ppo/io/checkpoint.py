"""Checkpoint files: written atomically, read back with one-line errors.

Checkpoints: one file per save, written to a temporary name and renamed, so none is ever half-written.

A checkpoint holds what a run needs to continue exactly: model (with its normalisers), optimizer and lr,
scheduler state, every RNG state, counters, the env's state and current observations, and the resolved
config. Files: checkpoints/iter_NNNNNN.pt every save_interval_iterations iterations and last.pt hold all of it; best.pt
holds the policy of the best return so far (model and normalisers, with the task, shapes, config and counters),
enough to play or to start another run from (checkpoint=), not to resume.
"""
from __future__ import annotations

import glob
import io
import json
import os
from typing import Any, Callable, Dict, Mapping, Optional

import torch

from isaac_ppo.errors import NonFiniteError, RunFailure, UserError

FORMAT = "isaac-ppo-checkpoint-1"


class Checkpointer:
    def __init__(self, run_dir: str, save_interval_iterations: int, write: bool = True):
        self.run_dir = run_dir
        self.dir = os.path.join(run_dir, "checkpoints")
        self.save_interval_iterations = save_interval_iterations
        self.best_return: Optional[float] = None
        self.write = write  # False on ranks other than 0: they take part in building the state, not in saving it

    def save(self, name: str, state: Dict[str, Any]) -> str:
        path = os.path.join(self.dir, name)
        if not self.write:
            return path
        bad = first_non_finite(state)
        if bad is not None:  # never on disk: the previous file of this name stays the last good one
            raise NonFiniteError(f"non-finite {bad} in the state for {name}: not saved, training stopped")
        # serialised in memory, then written by Python: a full disk or a file size limit is then an OSError
        # naming its cause (torch.save writing the file itself reports only "unexpected pos")
        data = io.BytesIO()
        torch.save(dict(state, format=FORMAT), data)
        tmp = path + ".tmp"
        try:
            os.makedirs(self.dir, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data.getbuffer())
            os.replace(tmp, path)
        except OSError as error:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise RunFailure(f"cannot write {path}: {error.strerror or error}") from None
        return path

    def save_after_failure(self, state_fn: Optional[Callable[[], Dict[str, Any]]], iteration: int) -> str:
        """After a failed write: last.pt, when the state is one a resumed run can continue from (state_fn given:
        its iteration's row is on disk) and the disk takes it. Says what was kept."""
        if state_fn is None:
            return "last.pt not updated: the newest checkpoint on disk is the last complete one"
        try:
            path = self.save("last.pt", state_fn())
        except (RunFailure, NonFiniteError) as error:
            return f"last.pt could not be saved either ({error}): the newest checkpoint on disk is the last good one"
        return f"saved {path} at iteration {iteration}: free space, then resume=auto continues the run"

    def remove_leftovers(self) -> None:
        """Delete the *.tmp files of saves a kill interrupted (the files they were to replace are intact)."""
        for tmp in glob.glob(os.path.join(self.dir, "*.tmp")):
            os.remove(tmp)

    def after_iteration(self, iteration: int, state_fn: Any, policy_fn: Any, score: Optional[float]) -> None:
        """Numbered and last checkpoints (the whole training state) every save_interval_iterations iterations; best.pt
        (the policy alone, what play and checkpoint= read) whenever the score improves: the evaluation's mean
        return when the run evaluates periodically, else the training return. The whole state is not built for
        best.pt: building it waits for a batch in flight and gathers every rank's envs."""
        done = iteration + 1
        if done % self.save_interval_iterations == 0:
            state = state_fn()
            self.save(f"iter_{done:06d}.pt", state)
            self.save("last.pt", state)
        self.offer_best(score, policy_fn)

    def offer_best(self, score: Optional[float], policy_fn: Any) -> None:
        """best.pt when the score beats the best so far (None or NaN: nothing to compare)."""
        if score is not None and score == score and (self.best_return is None or score > self.best_return):
            self.best_return = score
            self.save("best.pt", policy_fn())


def load_model(model: Any, state: Mapping[str, Any], path: str) -> None:
    """The checkpoint's model (and normalisers) into `model`; another network's is refused in one line naming the
    first tensor whose shape differs (torch's own error is a page of missing and unexpected keys) and the settings
    its run had (from the config the checkpoint carries)."""
    mine = model.state_dict()
    # (a layer one network has and the other lacks first: a recurrence, a critic of its own; then the sizes)
    extra = [name for name in state["model"] if name not in mine]
    missing = [name for name in mine if name not in state["model"]]
    if missing and not extra:
        raise UserError(f"checkpoint {path} holds another network ({missing[0]} absent there): use that run's "
                        f"agent.network settings{_its_network(state)}")
    for name in extra + [name for name in state["model"] if name in mine]:
        tensor = state["model"][name]
        shape = tuple(mine[name].shape) if name in mine else None
        if shape != tuple(tensor.shape):
            raise UserError(f"checkpoint {path} holds another network ({name}: {tuple(tensor.shape)} there, "
                            f"{shape or 'absent'} here): use that run's agent.network settings{_its_network(state)}")
    model.load_state_dict(state["model"])


def _its_network(state: Mapping[str, Any]) -> str:
    """' (its run had: profile=P agent.network.K=V ...)', the overrides that rebuild the checkpoint's network, or
    '' when the checkpoint carries no readable config."""
    try:
        from omegaconf import OmegaConf

        cfg = OmegaConf.create(state["config"])
        network = OmegaConf.to_container(cfg.agent.network, resolve=True)
        profile = cfg.get("profile", "none")
    except Exception:  # (an older or foreign checkpoint: the message stays general)
        return ""
    words = [] if profile in (None, "none") else [f"profile={profile}"]
    for key, value in network.items():
        if isinstance(value, dict):  # an rnn block: its keys one by one, none for a block that names no layer
            items = [(f"{key}.{inner}", v) for inner, v in value.items()] if value.get("name") else []
        else:
            items = [(key, value)]
        # (a value as an override: [128,64,32], false, 0.0)
        words += [f"agent.network.{name}=" + (v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))
                  for name, v in items]
    return f" (its run had: {' '.join(words)})"


def first_non_finite(tree: Any, path: str = "") -> Optional[str]:
    """The dotted name of the first floating tensor in a nested state (dicts, lists) holding a NaN or an
    infinity, or None."""
    if isinstance(tree, torch.Tensor):
        finite = not tree.is_floating_point() or bool(torch.isfinite(tree).all())
        return None if finite else (path or "tensor")
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, (list, tuple)) else ()
    for key, value in items:
        found = first_non_finite(value, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def load(path: str, device: Any = "cpu") -> Dict[str, Any]:
    """An isaac-ppo checkpoint's state with its tensors on `device`. Resume reads onto the CPU and lets each part
    copy onto its own device: a torch.Generator's state must be a CPU tensor wherever the generator lives (mapped
    to cuda, resuming a GPU run failed in set_state)."""
    if not os.path.isfile(path):
        raise UserError(f"checkpoint not found: {path} (give checkpoint= or resume= an existing .pt file)")
    try:
        state = torch_load(path, device)
    except Exception as error:  # a truncated or foreign file
        raise UserError(f"checkpoint {path} cannot be read ({type(error).__name__}): not an isaac-ppo checkpoint") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise UserError(f"checkpoint {path} is not an isaac-ppo checkpoint")
    return state


def torch_load(path: str, device: Any) -> Any:
    try:
        return torch.load(path, map_location=device, weights_only=False)
    except TypeError:  # torch < 1.13 (the Isaac Gym image) has no weights_only
        return torch.load(path, map_location=device)
