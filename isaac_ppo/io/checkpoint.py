"""Checkpoint files: written atomically, read back with one-line errors.

Checkpoints: one file per save, written to a temporary name and renamed, so none is ever half-written.

A checkpoint holds what a run needs to continue exactly: model (with its normalisers), optimizer and lr,
scheduler state, every RNG state, counters, the env's state and current observations, and the resolved
config. Files: checkpoints/iter_NNNNNN.pt every save_interval iterations and last.pt hold all of it; best.pt
holds the policy of the best return so far (model and normalisers, with the task, shapes, config and counters),
enough to play or to start another run from (checkpoint=), not to resume.
"""
from __future__ import annotations

import glob
import os
from typing import Any, Callable, Dict, Optional

import torch

from isaac_ppo.errors import NonFiniteError, UserError

FORMAT = "isaac-ppo-checkpoint-1"


class Checkpointer:
    def __init__(self, run_dir: str, save_interval: int, write: bool = True):
        self.run_dir = run_dir
        self.dir = os.path.join(run_dir, "checkpoints")
        self.save_interval = save_interval
        self.best_return: Optional[float] = None
        self.write = write  # False on ranks other than 0: they take part in building the state, not in saving it

    def save(self, name: str, state: Dict[str, Any]) -> str:
        path = os.path.join(self.dir, name)
        if not self.write:
            return path
        bad = first_non_finite(state)
        if bad is not None:  # never on disk: the previous file of this name stays the last good one
            raise NonFiniteError(f"non-finite {bad} in the state for {name}: not saved, training stopped")
        os.makedirs(self.dir, exist_ok=True)
        tmp = path + ".tmp"
        torch.save(dict(state, format=FORMAT), tmp)
        os.replace(tmp, path)
        return path

    def after_iteration(self, iteration: int, state_fn: Any, policy_fn: Any, mean_return: float) -> None:
        """Numbered and last checkpoints (the whole training state) every save_interval iterations; best.pt
        (the policy alone, what play and checkpoint= read) whenever the return improves. The whole state is
        not built for best.pt: building it waits for a batch in flight and gathers every rank's envs."""
        done = iteration + 1
        if done % self.save_interval == 0:
            state = state_fn()
            self.save(f"iter_{done:06d}.pt", state)
            self.save("last.pt", state)
        if mean_return == mean_return and (self.best_return is None or mean_return > self.best_return):
            self.best_return = mean_return
            self.save("best.pt", policy_fn())


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
    if not os.path.isfile(path):
        raise UserError(f"checkpoint not found: {path} (give checkpoint= or resume= an existing .pt file)")
    try:
        state = _torch_load(path, device)
    except Exception as error:  # a truncated or foreign file
        raise UserError(f"checkpoint {path} cannot be read ({type(error).__name__}): not an isaac-ppo checkpoint") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise UserError(f"checkpoint {path} is not an isaac-ppo checkpoint")
    return state


def _torch_load(path: str, device: Any) -> Any:
    try:
        return torch.load(path, map_location=device, weights_only=False)
    except TypeError:  # torch < 1.13 (the Isaac Gym image) has no weights_only
        return torch.load(path, map_location=device)


def newest_matching_last(runs_dir: str, experiment: str, mismatch: Callable[[str], Optional[str]]) -> str:
    """resume=auto: the most recently written last.pt of this experiment's runs whose config.yaml `mismatch`
    accepts (returns None for); a one-line refusal naming the newest candidate's difference otherwise."""
    pattern = os.path.join(runs_dir, experiment, "*", "checkpoints", "last.pt")
    candidates = sorted(glob.glob(pattern), key=os.path.getmtime, reverse=True)
    if not candidates:
        raise UserError(f"resume=auto found no {pattern}: give resume=PATH or start a new run")
    reasons = []
    for path in candidates:
        reason = mismatch(os.path.join(os.path.dirname(os.path.dirname(path)), "config.yaml"))
        if reason is None:
            return path
        reasons.append(reason)
    raise UserError(f"resume=auto found {len(candidates)} run(s) of {experiment}, none with this config (the newest: "
                    f"{reasons[0]}): give resume=PATH or start a new run")
