"""The VecEnv contract every simulator backend honours, and the input checks they share.

The learner sees nothing but this. It is IsaacGymEnvs' VecTask contract:

- attributes: ``num_envs`` (pool size), ``num_obs``, ``num_actions``, ``device``, ``max_episode_length``;
- ``reset() -> {"obs": Tensor[num_envs, num_obs]}``;
- ``step(actions) -> (obs_dict, rewards, resets, extras)`` where actions are ``Tensor[n, num_actions]``
  (n = the active envs, the whole pool unless ``set_active`` said otherwise), rewards are float ``[n]``,
  resets bool ``[n]``, and extras holds at least ``"time_outs"``, bool ``[n]``.

What the flags mean to the learner (identical on every backend): ``resets[i]`` is true when the transition
just returned ended env i's episode; ``time_outs[i]`` is true when it ended by truncation (episode length),
not by a terminal state, so the learner should bootstrap it. Actions are clipped to ``clipActions``;
observations to ``clipObservations``. Envs reset automatically.

Optional extras: ``"final_obs"`` (``[n, num_obs]``: the observation that ended each episode, equal to
``obs`` on rows that did not end; exact time-out bootstrapping for an env that resets within the step; an env
whose returned ``obs`` is itself the terminal one, as Isaac Gym's, leaves it out), ``"diverged"`` (int: simulations that
diverged and were reset during this step) and ``"diverged_envs"`` (bool ``[n]``: which; their episodes are
left out of every episode statistic), ``"reward_terms"`` and ``"measures"`` (name -> ``[n]``: the reward's parts,
and measures of the step that are no reward, each name with its unit, e.g. a legged robot's
``tracking_error_xy_mps``; evaluation reports each one's episode mean), and ``"outcomes"`` (name -> ``[n]``: what
counts once, at the step that ends an episode, e.g. FrankaCabinet's ``drawer_opened``; evaluation reports its mean
over episodes).

Optional capability ``set_active(n) -> {"obs": Tensor[n, num_obs]}``: from now on only the first n envs of
the pool are stepped and returned; the others keep their state. On MuJoCo the cost scales with n.

Optional critic observations (asymmetric actor-critic; IsaacGymEnvs' ``states`` and ``num_states``, rl-games'
central value, Isaac Lab's "critic" observation group): an env whose ``num_states`` attribute is above 0 returns
``"states"`` (``[n, num_states]``) beside ``"obs"`` in every observation dict (reset, step, set_active), and, with
``"final_obs"``, ``extras["final_states"]`` (the critic observation that ended each episode). The learner gives them
to the critic alone: the policy never sees them, and an exported policy takes ``obs`` only. Absent or 0 (every env
by default): nothing changes.
"""
from __future__ import annotations

import numbers
from typing import Any, Dict, Tuple

import torch

from typing import Protocol, runtime_checkable

from isaac_ppo.errors import InputError

StepResult = Tuple[Dict[str, torch.Tensor], torch.Tensor, torch.Tensor, Dict[str, Any]]


@runtime_checkable
class VecEnv(Protocol):
    num_envs: int
    num_obs: int
    num_actions: int
    device: torch.device
    max_episode_length: int

    def reset(self) -> Dict[str, torch.Tensor]:
        ...

    def step(self, actions: torch.Tensor) -> StepResult:
        ...


def num_states(env: Any) -> int:
    """The size of env's critic observation ("states"), 0 when it has none."""
    return int(getattr(env, "num_states", 0) or 0)


def supports_active(env: Any) -> bool:
    """Whether env can step only a leading subset of its pool."""
    return callable(getattr(env, "set_active", None))


def check_num_envs(num_envs: Any) -> int:
    """num_envs as a positive int, or an InputError that says so."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral) or num_envs <= 0:
        raise InputError(f"num_envs must be a positive integer, got {num_envs!r}")
    return int(num_envs)


def check_active(n: Any, num_envs: int) -> int:
    """The active count for set_active, within 1..num_envs."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not 1 <= n <= num_envs:
        raise InputError(f"set_active(n) needs 1 <= n <= num_envs ({num_envs}), got {n!r}")
    return int(n)


def check_actions(actions: Any, n: int, num_actions: int) -> torch.Tensor:
    """Refuse actions of the wrong shape or with non-finite entries, naming what is wrong.

    Returns the actions as a float tensor (on the caller's device). The finiteness check reads one bool back
    from the device: it guards the simulator, which would otherwise integrate NaN torques into every later
    state of the env.
    """
    if not isinstance(actions, torch.Tensor):
        actions = torch.as_tensor(actions, dtype=torch.float32)
    if actions.dim() != 2 or actions.shape[0] != n or actions.shape[1] != num_actions:
        raise InputError(
            f"actions must have shape ({n}, {num_actions}) (active envs, num_actions), got {tuple(actions.shape)}"
        )
    if not actions.is_floating_point():
        actions = actions.float()
    bad = nonfinite_rows(actions)
    if bad.numel():
        ids = bad.tolist()
        shown = ", ".join(str(i) for i in ids[:10]) + (", ..." if len(ids) > 10 else "")
        raise InputError(f"non-finite actions refused for {len(ids)} env(s), env ids: {shown}")
    return actions


def nonfinite_rows(x: torch.Tensor) -> torch.Tensor:
    """Indices of the rows of x holding a NaN or an infinity (one bool read back from x's device).

    The sum is the fast path: it is finite whenever every entry is, unless it overflows, and on the CPU it
    costs ~1/30 of isfinite(x).all() at (4096, 60); only a non-finite sum pays for the row-by-row look.
    """
    if bool(torch.isfinite(x.sum())):
        return torch.zeros(0, dtype=torch.long, device=x.device)
    return (~torch.isfinite(x).all(dim=1)).nonzero().flatten()
