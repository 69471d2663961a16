"""MujocoTask: the VecEnv contract over a pool of MuJoCo simulations (mujoco.batch or MuJoCo Warp).

Owns the active subset, substeps, automatic resets, divergence handling and the one copy per step to the
learner's device. A task subclass supplies its model file and three small torch functions:
``compute_observations``, ``compute_reward`` and ``reset_state``: the task's semantics, written once for both
simulators (sim/batch.py: mujoco.batch, float64 on the CPU; sim/warp.py: MuJoCo Warp, float32 on its device).

Reset timing (a documented difference from IsaacGymEnvs): an env whose episode ends in step t is reset
inside step t, Isaac Lab style. Step t returns the new episode's first observation in ``obs`` and the
terminal one in ``extras["final_obs"]``; the flags mean what the contract says. IsaacGymEnvs instead resets
inside step t+1, after physics already ran from the terminal state, which wastes one transition per episode.
An episode therefore lasts exactly ``episodeLength`` transitions here (a time-out fires when the step counter
reaches it), the same count rl-games reports for an IsaacGymEnvs episode (999 steps plus the wasted one). Not so for
IsaacGymEnvs' AnymalTerrain, which resets inside the ending step (check_termination: progress >= max_episode_length
- 1), so its episodes last 999 transitions to the port's 1000, and whose time_outs are never true (VecTask.step
computes them after post_physics_step, from a progress the reset has already zeroed); the port flags them, as the
contract says: PPO then bootstraps a time-out's value.

Critic observations (the contract's optional "states"): a task that has them says how many (``critic_obs``) and
computes them (``compute_states``); they are on when the task config's ``env.asymmetric_observations`` is true
(IsaacGymEnvs' key; the run's ``asymmetric=true`` sets it), clipped to clipObservations as IsaacGymEnvs clips its
states, and packed into the step's one copy beside the observations.
"""
from __future__ import annotations

import math
import os
import sys
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import torch

from isaac_ppo.envs.contract import StepResult, check_actions, check_active, check_num_envs, nonfinite_rows
from isaac_ppo.errors import UserError
from isaac_ppo.envs.registry import INTEGRATORS, TaskSpec
from isaac_ppo.tasks.randomizer import randomizer_of


def integrator(name: Any) -> int:
    """task.mujoco.integrator: MuJoCo's integrator of that name (issue 21: the Ant port's integration error is
    what an exploiting policy learned to use, so which integrator steps it is a choice to make and record)."""
    if name not in INTEGRATORS:
        raise UserError(f"task.mujoco.integrator={name}: MuJoCo's integrators are {', '.join(INTEGRATORS)} "
                        f"(or leave it out for the model file's)")
    import mujoco

    return int(getattr(mujoco.mjtIntegrator, f"mjINT_{name.upper()}"))

Selection = Union[slice, torch.Tensor]


class MujocoTask:
    """A batch of MuJoCo simulations of one task behind the VecEnv contract."""

    spec: TaskSpec  # the task, declared once (its name, model file, parameter domains, ...): envs/registry.py
    num_obs = 0
    num_actions = 0
    # the size of the task's critic observation (on with env.asymmetric_observations); 0: the task has none
    critic_obs = 0
    # derived MjData fields the task reads besides qpos/qvel (bound once, refreshed by every simulator call)
    derived_fields: Tuple[str, ...] = ()
    # IsaacGymEnvs' key of the episode length in control steps (episodeLength; BallBalance and the flying tasks:
    # maxEpisodeLength)
    episode_length_key = "episodeLength"
    # per-env tensors a checkpoint carries, beside the simulation state rows, so a resumed run continues exactly
    state_buffers: Tuple[str, ...] = ("progress", "last_actions")

    @classmethod
    def asset_path(cls) -> str:
        """The task's model file: its spec's model, relative to the folder of the module that defines the task."""
        module_file = sys.modules[cls.__module__].__file__
        return os.path.join(os.path.dirname(os.path.abspath(module_file)), cls.spec.model)

    def __init__(self, cfg: Mapping[str, Any], num_envs: int, seed: int = 0, device: str = "cpu",
                 sim: str = "mujoco"):
        import mujoco

        self.cfg = cfg
        env = cfg["env"]
        self.num_envs = check_num_envs(num_envs)
        self.device = torch.device(device)
        self.clip_actions = float(env.get("clipActions", 1.0))
        self.clip_obs = float(env.get("clipObservations", math.inf))
        self.power_scale = float(env.get("powerScale", 1.0))
        asymmetric = bool(env.get("asymmetric_observations", False))
        if asymmetric and not self.critic_obs:
            raise UserError(f"asymmetric=true: task {type(self).__name__} has no critic observations")
        self.num_states = self.critic_obs if asymmetric else 0
        # compute_reward's decomposition of the step's reward (term -> per-env tensor; the terms sum to it)
        self.reward_terms: Dict[str, torch.Tensor] = {}
        # compute_reward's measures of the step that are no reward (name with its unit -> per-env tensor), e.g. a
        # legged robot's velocity-tracking error in m/s: what evaluation and the gait check report beside the return
        self.measures: Dict[str, torch.Tensor] = {}
        # compute_reward's outcomes of the step (name -> per-env tensor) that count once, at an episode's last step,
        # e.g. FrankaCabinet's drawer_opened: evaluation reports each one's mean over episodes (a success rate)
        self.outcomes: Dict[str, torch.Tensor] = {}
        # each DOF's maximum speed (nv; inf where none), held after every physics step as PhysX's solver holds a
        # joint's maximum velocity; None (a task's default): MuJoCo's, no limit. A task's setup sets it.
        self.velocity_limits: Optional[torch.Tensor] = None
        self.dt = self.control_step_s()  # the control step, as the task's rewards use it
        self.max_episode_length = self.episode_length_steps()
        sim_cfg = cfg["mujoco"]
        self.substeps = int(sim_cfg["substeps"])
        # bounds past which a simulation has diverged though MuJoCo has not flagged it yet (a huge finite state)
        self.max_abs_qvel = float(sim_cfg.get("max_abs_qvel", math.inf))
        self.max_abs_reward = float(sim_cfg.get("max_abs_reward", math.inf))

        self.seed = int(seed)
        self.model = self.build_model()
        self.model.opt.timestep = float(sim_cfg["timestep"])
        if sim_cfg.get("integrator"):  # (absent or null: the model file's)
            self.model.opt.integrator = integrator(sim_cfg["integrator"])
        if sim_cfg.get("contact_timeconst"):
            # every geom's contact time constant, declared: MuJoCo raises one below 2 x timestep to that (its
            # refsafe rule), so without this a step of 1/60 s would simulate a softer floor than its finer
            # replays do (issue 44: the gait check must refine the integration, not the floor)
            self.model.geom_solref[:, 0] = float(sim_cfg["contact_timeconst"])
        if sim_cfg.get("refsafe") is False:
            # MuJoCo's refsafe rule off: a contact time constant below 2 x timestep is taken as declared (issue 44:
            # a 1/60 s step then keeps the 0.02 s floor of the finer steps; whether that stays stable is measured)
            self.model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_REFSAFE)
        self.configure_model(self.model)
        # IsaacGymEnvs' domain randomisation (task.randomize), None when off: its fields take a value per env too
        self.randomizer = randomizer_of(self)
        fields = self.per_env_model_fields() + (self.randomizer.fields if self.randomizer else ())
        self.sim = make_sim(sim, self.model, self.num_envs, self.derived_fields, sim_cfg, self.device,
                            tuple(dict.fromkeys(fields)))
        self.sim_device = self.sim.device  # where the state lives and the task's torch functions run
        # the simulator's torch views, no copies (float64 on mujoco.batch, float32 on MuJoCo Warp)
        self.qpos, self.qvel, self.ctrl, self.derived = self.sim.qpos, self.sim.qvel, self.sim.ctrl, self.sim.derived

        self.generator = torch.Generator(device=self.sim_device).manual_seed(int(seed))
        if self.randomizer is not None:
            self.randomizer.bind(self, seed)
        self.progress = torch.zeros(self.num_envs, dtype=torch.long, device=self.sim_device)
        self.last_actions = torch.zeros(self.num_envs, self.num_actions, device=self.sim_device)
        # staging buffer for everything a step returns: [obs | final_obs | states | final_states | reward | reset |
        # time_out] (states: the critic observations, none unless asymmetric), so that one copy carries it to the
        # learner's device
        self._out = torch.zeros(self.num_envs, 2 * (self.num_obs + self.num_states) + 3, device=self.sim_device)
        self.active = self.num_envs
        self.diverged_total = 0
        self.setup()

    # ----------------------------------------------------------------------------------------------
    # what a task supplies

    def control_step_s(self) -> float:
        """Seconds a control step lasts (control_step_of the task's config)."""
        return self.control_step_of(self.cfg)

    @classmethod
    def control_step_of(cls, cfg: Mapping[str, Any]) -> float:
        """Seconds a control step lasts under task config cfg: IsaacGymEnvs' sim.dt (a task with a decimation says
        otherwise)."""
        return float(cfg["sim"]["dt"])

    @classmethod
    def episode_overrides(cls, cfg: Mapping[str, Any], steps: int) -> Dict[str, Any]:
        """The task overrides (make()'s keywords) under which its episodes last `steps` control steps (cfg: its
        task config): IsaacGymEnvs' env.<episode_length_key>; a task that gives it in seconds says so. The inverse
        of episode_length_steps."""
        return {cls.episode_length_key: steps}

    def make_terminal(self, ids: Selection) -> None:
        """Put envs ids into a state this task ends as terminal on the next step (a fall, a drop, a success that
        ends the episode): the contract suite's known answer, which every task supplies."""
        raise NotImplementedError(f"{type(self).__name__} names no terminal state (make_terminal)")

    def episode_length_steps(self) -> int:
        """Control steps an episode lasts before its time-out (IsaacGymEnvs' env.<episode_length_key>; a task that
        gives its episodes in seconds converts them)."""
        return int(self.cfg["env"][self.episode_length_key])

    def set_controls(self, actions: torch.Tensor, n: int) -> None:
        """Write the controls of the first n envs from their clipped actions: motor torques, actions x powerScale
        (IsaacGymEnvs' locomotion and classic tasks); a task with other actuators says what an action means."""
        self.ctrl[:n] = actions * self.power_scale

    def build_model(self) -> Any:
        """The task's MjModel: its model file as written (a task whose world is generated, e.g. a terrain from
        the seed, builds it here; self.cfg and self.seed are set)."""
        import mujoco

        return mujoco.MjModel.from_xml_path(self.asset_path())

    def per_env_model_fields(self) -> Tuple[str, ...]:
        """Model fields that hold a value per env (domain randomisation, e.g. "geom_friction"): the simulator
        gives each env its own copy, writable through self.sim.model_fields[name], (num_envs, ...) (mujoco.batch's
        Batch.expand, MuJoCo Warp's put_model batch_sizes). A checkpoint does not carry them: a task that
        writes them keeps what it wrote in a state buffer and writes it again on load."""
        return ()

    def configure_model(self, model: Any) -> None:
        """Apply config values that live in the model (e.g. a motor gear) before the simulator copies it."""

    def setup(self) -> None:
        """Build the task's constant tensors (limits, targets, scales, on self.sim_device) once the simulator
        exists."""

    def after_physics(self, n: int) -> None:
        """What the task does to the first n envs between the physics and the observations of a step (a push, a
        command that follows the state): IsaacGymEnvs' post_physics_step before compute_observations."""

    def before_reset(self, ids: torch.Tensor, diverged: Optional[torch.Tensor]) -> None:
        """What the task reads of envs ids' final states before the simulator resets them (a curriculum's
        distance walked); diverged: which of them ended because their simulation diverged (their state is
        garbage), None on a reset of the whole pool."""

    def task_state(self) -> Dict[str, torch.Tensor]:
        """Scalars (0-dim tensors) that describe the task's own state after a step, logged per iteration under
        episode/NAME (IsaacGymEnvs' extras["episode"], e.g. AnymalTerrain's terrain_level); none by default."""
        return {}

    def show(self, data: Any, env: int) -> None:
        """Write into MjData data what env's picture shows but the simulation does not hold (a goal's mocap pose),
        after its qpos and qvel: the video's frame of it. Nothing by default."""

    def compute_observations(self, sel: Selection) -> torch.Tensor:
        """Float32 observations of the envs in sel (a slice or an index tensor), unclipped."""
        raise NotImplementedError

    def compute_reward(self, obs: torch.Tensor, sel: Selection) -> Tuple[torch.Tensor, torch.Tensor]:
        """Rewards (float32) and terminal flags (bool) of the envs in sel, from their observations."""
        raise NotImplementedError

    def compute_states(self, obs: torch.Tensor, sel: Selection) -> torch.Tensor:
        """Float32 critic observations (critic_obs of them) of the envs in sel, given their observations, unclipped:
        tasks with critic_obs > 0 only."""
        raise NotImplementedError

    def reset_state(self, ids: torch.Tensor) -> None:
        """Write a fresh initial qpos/qvel for envs ids (the simulator already reset them to the model's defaults)
        and reset any per-env task buffers."""
        raise NotImplementedError

    # ----------------------------------------------------------------------------------------------
    # the contract

    def reset(self) -> Dict[str, torch.Tensor]:
        """Reset every env of the pool and return the first observations of the active ones."""
        self.reset_idx(torch.arange(self.num_envs, device=self.sim_device))
        return self._observe(slice(0, self.active))

    def set_active(self, n: int) -> Dict[str, torch.Tensor]:
        """Step only the first n envs from now on; returns their current observations."""
        self.active = check_active(n, self.num_envs)
        return self._observe(slice(0, n))

    def step(self, actions: torch.Tensor) -> StepResult:
        n, num_obs, num_states = self.active, self.num_obs, self.num_states
        # the staging buffer's columns: observations, final observations, states, final states, then the flags
        states_at, final_states_at, flags_at = 2 * num_obs, 2 * num_obs + num_states, 2 * (num_obs + num_states)
        actions = check_actions(actions, n, self.num_actions).to(self.sim_device, torch.float32)
        if self.randomizer is not None:  # (IsaacGymEnvs' action noise: before the clip)
            actions = self.randomizer.noisy("actions", actions, slice(0, n))
        actions = actions.clamp(-self.clip_actions, self.clip_actions)
        self.last_actions[:n] = actions
        self.set_controls(actions, n)
        if self.velocity_limits is None:
            self.sim.step(n, self.substeps)
        else:  # (one simulator call a physics step: the limit holds at every one of them, under any refinement)
            for _ in range(self.substeps):
                self.sim.step(n, 1)
                qvel = self.qvel[:n]
                torch.maximum(torch.minimum(qvel, self.velocity_limits), -self.velocity_limits, out=qvel)
        self.progress[:n] += 1
        if self.randomizer is not None:
            self.randomizer.count(n)
        self.after_physics(n)

        active = slice(0, n)
        obs = self.compute_observations(active)
        rew, terminated = self.compute_reward(obs, active)
        states = self.compute_states(obs, active) if num_states else None
        time_out = (self.progress[:n] >= self.max_episode_length) & ~terminated
        if self.randomizer is not None:  # (after the reward, out of place: the noise is on what the policy sees)
            obs = self.randomizer.noisy("observations", obs, active)
        diverged = self._diverged(n, obs, rew)
        diverged_count = int(diverged.sum())
        if diverged_count:
            # a diverged simulation's state is garbage: end its episode as terminal with no reward and a
            # zero final observation, so nothing non-finite reaches the batch
            obs[diverged] = 0.0
            if states is not None:
                states[diverged] = 0.0
            rew[diverged] = 0.0
            terminated[diverged] = True
            time_out[diverged] = False
            self.diverged_total += diverged_count
        resets = terminated | time_out

        out = self._out[:n]
        self._clip_into(out[:, num_obs : 2 * num_obs], obs)
        if states is not None:
            self._clip_into(out[:, final_states_at:flags_at], states)
        reset_ids = resets.nonzero().flatten()
        if reset_ids.numel():
            self.reset_idx(reset_ids, diverged[reset_ids])
            # out of place: a task's measures may be views of obs (FrankaCabinet's opening is its obs 21), and an
            # ending step's must stay its episode's (a copy of obs on the steps that reset, none on the others)
            fresh = self.compute_observations(reset_ids)
            obs = obs.index_put((reset_ids,), self._seen(fresh, reset_ids))
            if states is not None:
                states[reset_ids] = self.compute_states(fresh, reset_ids)
        self._clip_into(out[:, :num_obs], obs)
        if states is not None:
            self._clip_into(out[:, states_at:final_states_at], states)
        out[:, flags_at] = rew
        out[:, flags_at + 1] = resets
        out[:, flags_at + 2] = time_out

        packed = out.to(self.device, copy=True)
        obs_dict = {"obs": packed[:, :num_obs]}
        extras = {
            "time_outs": packed[:, flags_at + 2].bool(),
            "final_obs": packed[:, num_obs : 2 * num_obs],
            "diverged": diverged_count,
            "diverged_envs": diverged.to(self.device),
            # (a diverged simulation's terms are zero, as its reward, and so are its measures, which are garbage:
            # readers skip diverged_envs)
            "reward_terms": self._zeroed(self.reward_terms, diverged, diverged_count),
            "measures": self._zeroed(self.measures, diverged, diverged_count),
        }
        if self.outcomes:
            extras["outcomes"] = self._zeroed(self.outcomes, diverged, diverged_count)
        task_state = self.task_state()
        if task_state:
            extras["task_state"] = task_state
        if num_states:
            obs_dict["states"] = packed[:, states_at:final_states_at]
            extras["final_states"] = packed[:, final_states_at:flags_at]
        return obs_dict, packed[:, flags_at], packed[:, flags_at + 1].bool(), extras

    def state_dict(self) -> Dict[str, Any]:
        """Everything the next step depends on: state rows, episode counters, task buffers, reset RNG."""
        state: Dict[str, Any] = {name: getattr(self, name).clone() for name in self.state_buffers}
        if self.randomizer is not None:
            state["randomizer"] = self.randomizer.state_dict()
        state.update(
            sim_state=self.sim.get_state(),
            generator=self.generator.get_state(),
            active=self.active,
            diverged_total=self.diverged_total,
        )
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = tuple(state["sim_state"].shape)
        if saved != self.sim.state_shape:
            raise UserError(
                f"the checkpoint's env pool has {saved[0]} envs x {saved[1]} state values, this run "
                f"{self.num_envs} x {self.sim.state_shape[1]} ({self.sim.name}): resume with the same task, "
                "num_envs and sim"
            )
        self.sim.set_state(state["sim_state"])
        if self.randomizer is not None:
            self.randomizer.load_state_dict(state["randomizer"])
        for name in self.state_buffers:
            getattr(self, name).copy_(state[name])
        self.generator.set_state(state["generator"])
        self.active = int(state["active"])
        self.diverged_total = int(state["diverged_total"])

    # ----------------------------------------------------------------------------------------------
    # machinery

    def reset_idx(self, ids: torch.Tensor, diverged: Optional[torch.Tensor] = None) -> None:
        """Reset envs ids to fresh initial states (reset noise from this env's generator); diverged: which of them
        ended by a diverged simulation (None: a reset of the pool, not the end of episodes)."""
        # the simulator's reset clears state, controls and divergence flags; forward() after the new state is
        # written refreshes the derived fields (sensors) the first observation reads
        self.before_reset(ids, diverged)
        self.sim.reset(ids)
        if self.randomizer is not None:  # (IsaacGymEnvs re-draws at resets)
            self.randomizer.on_reset(ids)
        self.reset_state(ids)
        if self.derived_fields:
            self.sim.forward(ids)
        self.progress[ids] = 0
        self.last_actions[ids] = 0.0

    def _observe(self, sel: slice) -> Dict[str, torch.Tensor]:
        """The observation dict of the envs in sel (with their critic observations when asymmetric), clipped, on
        the learner's device."""
        obs = self.compute_observations(sel)
        out = {"obs": self._seen(obs, sel)}
        if self.num_states:
            out["states"] = self.compute_states(obs, sel)
        return {key: (value.clamp(-self.clip_obs, self.clip_obs) if math.isfinite(self.clip_obs) else value
                      ).to(self.device) for key, value in out.items()}

    def _seen(self, obs: torch.Tensor, sel: Selection) -> torch.Tensor:
        """The observations as the policy sees them: with the randomisation's noise, if any."""
        return obs if self.randomizer is None else self.randomizer.noisy("observations", obs, sel)

    def _zeroed(self, per_env: Dict[str, torch.Tensor], diverged: torch.Tensor,
                diverged_count: int) -> Dict[str, torch.Tensor]:
        """per_env's tensors on the learner's device, zero for the diverged envs (masked only on a step that has
        one)."""
        return {name: (value.masked_fill(diverged, 0.0) if diverged_count else value).to(self.device)
                for name, value in per_env.items()}

    def _clip_into(self, dst: torch.Tensor, obs: torch.Tensor) -> None:
        if math.isfinite(self.clip_obs):
            torch.clamp(obs, -self.clip_obs, self.clip_obs, out=dst)
        else:
            dst.copy_(obs)

    def _diverged(self, n: int, obs: torch.Tensor, rew: torch.Tensor) -> torch.Tensor:
        """Which active envs (a bool mask of n) the simulator flagged, have a non-finite observation, or have
        velocities or a reward past the task's bounds.

        mujoco.batch answers a diverging simulation (bad qacc, non-finite or huge state) by resetting its data to
        the model defaults and counting a warning, so the state alone cannot tell; MuJoCo Warp flags a world
        whose contact or constraint buffers overflowed (its physics is then wrong). A simulation can also blow up
        to a huge but finite state a few steps before MuJoCo flags it (one Ant episode returned about -18
        million so): the bounds catch it on that step.
        """
        mask = (self.qvel[:n].abs().amax(dim=1) > self.max_abs_qvel) | (rew.abs() > self.max_abs_reward)
        mask[nonfinite_rows(obs)] = True
        flagged = self.sim.flagged(n)
        if flagged is not None:
            mask |= flagged
        return mask


def make_sim(sim: str, model: Any, num_envs: int, derived_fields: Tuple[str, ...], sim_cfg: Mapping[str, Any],
             device: torch.device, model_fields: Tuple[str, ...] = ()) -> Any:
    """The simulator behind a task: mujoco.batch on the CPU ("mujoco"), or MuJoCo Warp on device ("mjwarp");
    model_fields: those with a value per env."""
    if sim == "mjwarp":
        from isaac_ppo.tasks.sim.warp import WarpSim

        return WarpSim(model, num_envs, derived_fields, sim_cfg, device, model_fields)
    from isaac_ppo.tasks.sim.batch import BatchSim

    return BatchSim(model, num_envs, derived_fields, sim_cfg, model_fields)
