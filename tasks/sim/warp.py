"""WarpSim: a pool of MuJoCo simulations on MuJoCo Warp (PyPI mujoco-warp), float32, on a CUDA GPU or the CPU.

The same surface as sim_batch.BatchSim, so a task's semantics run unchanged on either. MuJoCo Warp differs from
mujoco.batch in ways this class absorbs:
- ``mjw.step`` advances every world. Stepping only the first n (the contract's active subset) is emulated:
  the other worlds' state rows are kept aside and written back, so they resume exactly where they stood.
- No auto-reset and no warning counters: a diverging world shows as a non-finite state, and a world whose
  contact or constraint buffers overflowed (its physics is silently wrong from then on) as a nonzero
  ``d.overflow`` bitmask (sticky until the world is reset). ``flagged`` reports both, so the task ends those
  episodes as diverged and resets them; nothing they produced is trained on. The buffers are sized per task
  (``mujoco.nconmax``/``njmax`` in cfg/task/*.yaml, measured, overridable).
- The substep loop is recorded once as a graph (a CUDA graph on the GPU; warp records and replays on the CPU
  too, bit for bit) and replayed each control step; inputs are written in place through zero-copy torch views.
  On the GPU, warp launches on its own stream (a graph cannot be recorded on torch's default stream): each
  replay first waits for torch's pending work on the views, and torch's stream then waits for the replay.
- MuJoCo Warp 4.0.0's height-field contacts report a geom that sinks into the field metres deep (the witness
  step's float32 cancellation and support direction): warp_hfield_fix.py mends the two functions before any
  kernel is built (AnymalTerrain's blow-ups on MuJoCo Warp).
- Kernels are compiled on first use (from an empty cache on a 2-core CPU: Cartpole 28 s, then Ant 9 s and
  Humanoid 4 s more, most being shared), then cached (WARP_CACHE_PATH, default ~/.cache/warp).
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from isaac_ppo.envs.contract import nonfinite_rows
from isaac_ppo.errors import UserError

INSTALL_HINT = ("sim=mjwarp needs MuJoCo Warp (Python >= 3.11): pip install 'isaac-ppo[mjwarp]', "
                "or use sim=mujoco")
# the per-world arrays whose values the next step depends on (besides the derived fields a task reads);
# what a checkpoint carries and what the inactive worlds keep across a step of the others
STATE_FIELDS = ("qpos", "qvel", "act", "ctrl", "qacc_warmstart", "time")


OPT_LEVEL_VARIABLE = "ISAAC_PPO_WARP_OPT_LEVEL"


def optimization_level() -> Optional[int]:
    """Warp's compiler optimisation level for the kernels this process builds, from ISAAC_PPO_WARP_OPT_LEVEL
    (0-3); unset: Warp's own default (-O2 on the CPU, -O3 on CUDA). A lower level compiles a fresh cache faster and
    runs slower (benchmarks/mjwarp_compile_cost.py --opt-level): the test suite's trade on a CPU (tests/conftest.py),
    not a training's. The level is part of each module's cache key, so each level has its own cached kernels."""
    value = os.environ.get(OPT_LEVEL_VARIABLE, "").strip()
    if not value:
        return None
    if value not in ("0", "1", "2", "3"):
        raise UserError(f"{OPT_LEVEL_VARIABLE}={value!r}: Warp's optimisation level is 0, 1, 2 or 3 (or unset for "
                        "Warp's default)")
    return int(value)


def import_warp() -> Tuple[Any, Any]:
    try:
        import warp as wp

        wp.config.log_level = wp.LOG_WARNING  # no banner, no line per module (before mujoco_warp starts warp)
        import mujoco_warp as mjw
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    wp.config.optimization_level = optimization_level()
    from isaac_ppo.tasks.sim import warp_hfield_fix

    warp_hfield_fix.apply(mjw)  # (before any kernel is built: height-field contact depths, see the module)
    return wp, mjw


class WarpSim:
    """num_envs worlds of model on MuJoCo Warp, on device (torch's cpu or cuda[:i])."""

    name = "mjwarp"

    def __init__(self, model: Any, num_envs: int, derived_fields: Sequence[str], sim_cfg: Mapping[str, Any],
                 device: torch.device, model_fields: Sequence[str] = ()):
        wp, mjw = import_warp()
        self.wp, self.mjw = wp, mjw
        wp.init()
        self.device = torch.device(device)
        if self.device.type == "cuda":
            if not wp.is_cuda_available() or not torch.cuda.is_available():
                raise UserError(f"device={device}: MuJoCo Warp finds no CUDA device here; use device=cpu")
            if self.device.index is None:  # (torch's current device: a rank's own GPU under torchrun)
                self.device = torch.device("cuda", torch.cuda.current_device())
            self.wp_device = f"cuda:{self.device.index}"
        elif self.device.type == "cpu":
            self.wp_device = "cpu"
        else:
            raise UserError(f"sim=mjwarp runs on device=cpu or device=cuda[:i], not {device}")
        self.model = model
        self.num_envs = num_envs
        nconmax = sim_cfg.get("nconmax")
        njmax = sim_cfg.get("njmax")
        with wp.ScopedDevice(self.wp_device):
            try:
                # (a field with a value per world gets a leading dimension of num_envs)
                self.m = mjw.put_model(model, batch_sizes={f: num_envs for f in model_fields} or None)
            except NotImplementedError as error:
                raise UserError(f"MuJoCo Warp cannot run this task's model: {error}") from None
            self.m.opt.warn_overflow = 0  # overflowed worlds are counted per env (flagged), not printed
            self.d = mjw.make_data(model, nworld=num_envs, nconmax=None if nconmax is None else int(nconmax),
                                   njmax=None if njmax is None else int(njmax))
        view = wp.to_torch  # zero copy, on the simulation's device
        self.qpos, self.qvel, self.ctrl = view(self.d.qpos), view(self.d.qvel), view(self.d.ctrl)
        self.derived = {f: view(getattr(self.d, f)) for f in derived_fields}
        # per-world model fields (domain randomisation): (num_envs, ...) views, written in place (the graphs read them)
        self.model_fields = {f: view(getattr(self.m, f)) for f in model_fields}
        self._overflow = view(self.d.overflow)
        self.state_rows: List[torch.Tensor] = [view(getattr(self.d, f)) for f in STATE_FIELDS]
        self._rows = self.state_rows + list(self.derived.values())
        self._stream = wp.get_stream(self.wp_device) if self.device.type == "cuda" else None
        self._selected = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self._selected_wp = wp.from_torch(self._selected)
        self._graphs: Dict[int, Any] = {}

        print(f"[mjwarp] {num_envs} worlds on {self.wp_device}: loading kernels (compiled on first use, then cached "
              "in WARP_CACHE_PATH, default ~/.cache/warp; ~30 s for a first model on a 2-core CPU)", file=sys.stderr,
              flush=True)
        # (connect and weld equality constraints: see _fresh_body_velocities)
        import mujoco  # (the model is a mujoco.MjModel: mujoco is imported already)

        stale = (int(mujoco.mjtEq.mjEQ_CONNECT), int(mujoco.mjtEq.mjEQ_WELD))  # (whose J-dot-v reads them)
        self._stale_velocities_read = bool(np.isin(model.eq_type, stale).any())
        self._forward_graph = self._record(lambda: (self._fresh_body_velocities(), mjw.forward(self.m, self.d)))
        # (the reset reads the selection mask in place: one recording serves every selection)
        self._reset_graph = self._record(lambda: mjw.reset_data(self.m, self.d, reset=self._selected_wp))
        self._step_graph(int(sim_cfg["substeps"]))  # (recorded now: the task's substeps; others when first asked)

    # ----------------------------------------------------------------------------------------------

    def step(self, n: int, substeps: int) -> None:
        """Advance the first n worlds by substeps physics steps; the others keep their state."""
        graph = self._step_graph(substeps)
        kept = [row[n:].clone() for row in self._rows] if n < self.num_envs else None
        self._replay(graph)
        if kept is not None:
            for row, value in zip(self._rows, kept):
                row[n:] = value
            self._overflow[n:] = 0  # (an inactive world's stepped copy may have overflowed; it was not kept)

    def reset(self, ids: torch.Tensor) -> None:
        """Put worlds ids back to the model's defaults (state, controls, overflow flags)."""
        self._select(ids)
        self._replay(self._reset_graph)

    def forward(self, ids: torch.Tensor) -> None:
        """Refresh the derived fields of worlds ids from their (just written) state. mjw.forward computes every
        world; the others keep the values their last step left (those of its last substep, as mujoco.batch)."""
        self._select(ids)
        kept = {name: value.clone() for name, value in self.derived.items()}
        self._replay(self._forward_graph)
        for name, value in self.derived.items():  # (a field of any rank: sensordata (n, k), xmat (n, nbody, 3, 3))
            chosen = self._selected.view((-1,) + (1,) * (value.dim() - 1))
            torch.where(chosen, value, kept[name], out=value)

    def flagged(self, n: int) -> Optional[torch.Tensor]:
        """Which of the first n worlds overflowed a contact/constraint buffer or hold a non-finite state."""
        mask = self._overflow[:n] != 0
        for state in (self.qpos[:n], self.qvel[:n]):
            bad = nonfinite_rows(state)
            if bad.numel():
                mask[bad] = True
        return mask

    def set_const(self, ids: Any = None) -> None:
        """Recompute what MuJoCo derives from the mass fields (mujoco_warp.set_const), per world: in every world,
        whatever ids asks (mujoco_warp has no subset; a world whose fields did not change gets the same values)."""
        with self.wp.ScopedDevice(self.wp_device):
            self.mjw.set_const(self.m, self.d)

    def set_gravity(self, gravity: Any) -> None:
        """One gravity (m/s^2, 3) for every world (domain randomisation's sim_params: one scene's), in place."""
        view = self.wp.to_torch(self.m.opt.gravity)
        view.copy_(torch.as_tensor(gravity, dtype=view.dtype).expand_as(view))

    def get_state(self) -> torch.Tensor:
        return torch.cat([row.reshape(self.num_envs, -1) for row in self._rows], dim=1).to("cpu", copy=True)

    def set_state(self, state: torch.Tensor) -> None:
        state = state.to(self.device)
        start = 0
        for row in self._rows:
            width = row.reshape(self.num_envs, -1).shape[1]
            row.copy_(state[:, start : start + width].reshape(row.shape))
            start += width
        self._overflow.zero_()

    @property
    def state_shape(self) -> tuple:
        return (self.num_envs, sum(row.reshape(self.num_envs, -1).shape[1] for row in self._rows))

    # ----------------------------------------------------------------------------------------------

    def _step_graph(self, substeps: int) -> Any:
        if substeps not in self._graphs:
            self._graphs[substeps] = self._record(
                lambda: [(self._fresh_body_velocities(), self.mjw.step(self.m, self.d)) for _ in range(substeps)])
        return self._graphs[substeps]

    def _fresh_body_velocities(self) -> None:
        """Body positions and velocities (cvel, cdof_dot) of the current state, before a step or forward pass reads
        them, on models with connect or weld equality constraints. MuJoCo Warp 4.0.0 builds those constraints' J-dot-v
        term (reference acceleration) in the position stage from cvel and cdof_dot, which the velocity stage
        computes later in the same pass: it reads the previous step's values, or whatever a reset or a state write
        left (NaN after a diverged world). Measured on BallBalance (three connect constraints, from the same state
        and controls): against MuJoCo's C engine 2.2e-4 apart on qvel after 2 steps and 1e-3 after 10 without this,
        1.5e-6 and 4e-6 with it; and a resumed env stepped 0.83 away on its first step without it, bit for bit with it.
        Recorded into the graphs, once per physics step; models without such constraints skip it."""
        if self._stale_velocities_read:
            self.mjw.kinematics(self.m, self.d)
            self.mjw.com_pos(self.m, self.d)
            self.mjw.com_vel(self.m, self.d)

    def _select(self, ids: torch.Tensor) -> None:
        self._selected.zero_()
        self._selected[ids.to(self.device)] = True

    def _replay(self, graph: Any) -> None:
        if self._stream is None:  # (CPU: in order with torch's work)
            self.wp.capture_launch(graph)
            return
        torch_stream = torch.cuda.current_stream(self.device)
        self._stream.wait_stream(self.wp.stream_from_torch(torch_stream))
        self.wp.capture_launch(graph, stream=self._stream)
        torch_stream.wait_stream(self.wp.stream_to_torch(self._stream))

    def _synchronize(self) -> None:
        if self._stream is not None:
            torch.cuda.synchronize(self.device)
            self.wp.synchronize_device(self.wp_device)

    def _record(self, launch: Any) -> Any:
        """Run launch once eagerly (compiles its kernels; the state it leaves is overwritten by the first
        reset), then record it as a graph to replay."""
        wp = self.wp
        with wp.ScopedDevice(self.wp_device):
            saved = [row.clone() for row in self._rows + [self._overflow]]
            self._synchronize()
            launch()
            with wp.ScopedCapture(device=self.wp_device) as capture:
                launch()
            self._synchronize()
            for row, value in zip(self._rows + [self._overflow], saved):
                row.copy_(value)
        return capture.graph
