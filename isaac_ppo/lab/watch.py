"""A training run watched from outside: the isaac-ppo-train command, a child that stops with its parent, and
what the run's metrics.jsonl has said so far (the clock, the evaluations, when a threshold was first met).

isaac-ppo-tune, isaac-ppo-study and isaac-ppo-bench start isaac-ppo-train as a subprocess and read its rows while
it runs; they share this piece so that they read the same clock: a row's wall_s is the training's (evaluation left
out), and the evaluations' own seconds are added, as metrics.json's solve_times counts them.
"""
from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any, Dict, List, Optional, Tuple


def train_command() -> List[str]:
    """isaac-ppo-train of this Python environment (the module when the console script is not installed)."""
    script = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
    return [script] if os.path.isfile(script) else [sys.executable, "-m", "isaac_ppo.train"]


def die_with_parent() -> None:
    """In the child (a Popen preexec_fn): receive SIGTERM when the parent dies, even by SIGKILL, so train saves
    its last checkpoint and stops instead of running on unwatched."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass


RETURN_MEAN = "return_mean"  # an evaluation's mean return; a task's solve_measures name other keys of it


class Progress:
    """What a run's metrics.jsonl has said so far: the clock (training plus evaluations), the best evaluation and
    when the evaluation's `measure` (its mean return, or a task's measure of success such as FrankaCabinet's
    drawer_opened) first reached `threshold`. read() takes only the rows added since the last read."""

    def __init__(self, threshold: float = float("inf"), measure: str = RETURN_MEAN) -> None:
        self.threshold, self.measure = threshold, measure
        self._reset()

    def _reset(self) -> None:
        self.offset, self.eval_s, self.elapsed = 0, 0.0, 0.0
        self.best: Optional[float] = None
        self.solved: Optional[Tuple[float, Optional[int]]] = None

    def read(self, path: str) -> None:
        if not os.path.isfile(path):
            return
        if os.path.getsize(path) < self.offset:  # a run resumed in place dropped the rows after its checkpoint
            self._reset()
        with open(path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a row still being written waits for the next read
        self.offset += len(complete)
        for line in complete.decode().splitlines():
            if line.strip():
                self.add(json.loads(line))

    def add(self, row: Dict[str, Any]) -> None:
        evaluation = row.get("eval")
        if isinstance(evaluation, dict):
            self.eval_s += float(evaluation.get("seconds") or 0.0)
        self.elapsed = float(row.get("wall_s", 0.0)) + self.eval_s  # row wall_s leaves evaluation out
        if isinstance(evaluation, dict) and isinstance(evaluation.get(self.measure), (int, float)):
            at = float(evaluation.get("wall_s", self.elapsed))
            self.elapsed = max(self.elapsed, at)
            value = float(evaluation[self.measure])
            self.best = value if self.best is None else max(self.best, value)
            if self.solved is None and value >= self.threshold:
                self.solved = (at, evaluation.get("env_steps", row.get("env_steps")))


def read_rows(path: str) -> List[Dict[str, Any]]:
    """A metrics.jsonl's whole rows (a last row still being written, or torn by a kill, is left out)."""
    rows = []
    if not os.path.isfile(path):
        return rows
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return rows


def clock_s(rows: List[Dict[str, Any]]) -> float:
    """The run's clock at its last row: training plus evaluations, as Progress reads it."""
    progress = Progress()
    for row in rows:
        progress.add(row)
    return progress.elapsed
