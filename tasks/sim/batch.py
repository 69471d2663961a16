"""BatchSim: a pool of MuJoCo simulations on mujoco.batch (the CPU backend, float64, threads).

What a task's semantics need from a simulator, and nothing else: torch views of the state rows and of the derived
fields the task reads, stepping the leading n envs, resetting and refreshing chosen envs, the envs the engine
itself flagged as diverged, and the state a checkpoint carries. MuJoCo Warp offers the same in sim_warp.py.
"""
from __future__ import annotations

import logging
import os
import warnings
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import torch

MUJOCO_LOGGER = "isaac_ppo.mujoco"
LOGGED_WARNINGS = 100  # per process: the rest are only counted (extras["diverged"], env/diverged)


class BatchSim:
    """num_envs copies of model stepped by mujoco.batch.Batch on nthread threads."""

    name = "mujoco"

    def __init__(self, model: Any, num_envs: int, derived_fields: Sequence[str], sim_cfg: Mapping[str, Any],
                 model_fields: Sequence[str] = ()):
        import mujoco
        from mujoco.batch import Batch

        _send_mujoco_warnings_to_the_log(mujoco)
        self.model = model
        self.num_envs = num_envs
        self.device = torch.device("cpu")
        nthread = int(sim_cfg.get("nthread", 0)) or usable_cpus()  # (0: every CPU this process may use)
        self.batch = Batch(model, num_envs, nthread)
        # torch views of the batch's arrays, no copies: state rows (float64, writable) ...
        self.qpos = torch.from_numpy(self.batch.bind("qpos"))
        self.qvel = torch.from_numpy(self.batch.bind("qvel"))
        self.ctrl = torch.from_numpy(self.batch.bind("ctrl"))
        # ... and derived outputs, which the batch refreshes after every call (read-only for us; torch warns
        # that it cannot mark them so)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            self.derived = {f: torch.from_numpy(self.batch.bind(f)) for f in derived_fields}
        # model fields with a value per simulation (domain randomisation): live (num_envs, ...) views, writable
        self.model_fields = {f: torch.from_numpy(self.batch.expand(f)) for f in model_fields}
        self._warning_counts = self.batch.warning[:, :, 1]  # (nsim, mjNWARNING), cleared by a reset
        self._mj_stage_none = int(mujoco.mjtStage.mjSTAGE_NONE)
        self._sim_ids = np.arange(num_envs, dtype=np.int32)

    def step(self, n: int, substeps: int) -> None:
        """Advance the first n envs by substeps physics steps; the others keep their state."""
        self.batch.step(None if n == self.num_envs else self._sim_ids[:n], substeps)

    def reset(self, ids: torch.Tensor) -> None:
        """Put envs ids back to the model's defaults (state, controls, warning counters)."""
        self.batch.reset(ids.numpy().astype(np.int32), stage=self._mj_stage_none)

    def forward(self, ids: torch.Tensor) -> None:
        """Refresh the derived fields of envs ids from their (just written) state."""
        self.batch.forward(ids.numpy().astype(np.int32))

    def flagged(self, n: int) -> Optional[torch.Tensor]:
        """Which of the first n envs MuJoCo flagged (a warning: it found the state diverged and reset it to
        the model defaults, so the state alone cannot tell), or None when none did."""
        counts = self._warning_counts[:n]
        if np.count_nonzero(counts):
            return torch.from_numpy(counts.any(axis=1))
        return None

    def set_const(self, ids: Any = None) -> None:
        """Recompute what MuJoCo derives from the mass fields (mj_setConst), per simulation: after writing them, in
        the simulations ids (a tensor of indices; None: all)."""
        self.batch.set_const(None if ids is None else ids.cpu().numpy())

    def set_gravity(self, gravity: Any) -> None:
        """One gravity (m/s^2, 3) for every simulation (domain randomisation's sim_params: one scene's)."""
        if not hasattr(self, "_gravity"):
            self._gravity = self.batch.expand("opt.gravity")
        self._gravity[:] = np.asarray(gravity, dtype=np.float64)

    def get_state(self) -> torch.Tensor:
        return torch.from_numpy(self.batch.state.copy())

    def set_state(self, state: torch.Tensor) -> None:
        self.batch.state[:] = state.numpy()

    @property
    def state_shape(self) -> tuple:
        return tuple(self.batch.state.shape)


def _send_mujoco_warnings_to_the_log(mujoco: Any) -> None:
    """MuJoCo's own warnings (a line per diverged simulation, thousands an iteration when a task's scales are
    wrong) go to the run's log file (Hydra's train.log), not to the console or a MUJOCO_LOG.TXT in the working
    directory. The divergences themselves are counted per step and shown in the progress line."""
    logger = logging.getLogger(MUJOCO_LOGGER)
    logger.propagate = False  # the root logger's console handler must not print them
    logger.handlers = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)] or [
        logging.NullHandler()]
    logged = [0]

    def to_log(message: str) -> None:  # (called from the batch's threads, with the GIL)
        logged[0] += 1
        if logged[0] <= LOGGED_WARNINGS:
            logger.warning("MuJoCo: %s", message.strip())
        elif logged[0] == LOGGED_WARNINGS + 1:
            logger.warning("MuJoCo: further warnings are not logged (divergences are counted in env/diverged)")

    mujoco.set_mju_user_warning(to_log)


def usable_cpus() -> int:
    """CPUs this process may run on (a SLURM or container CPU limit, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
