"""agent=rl_games: the task's PPO values trained by rl-games' learner on our env, for a peer comparison on the
same numbers.

The env is the one isaac-ppo-train built; rl-games 1.6 (imported only here, only when asked for) is plugged in as
IsaacGymEnvs' train.py plugs in its RLGPUEnv: an IVecEnv registered with rl-games, a params tree translated from
cfg.agent (written to <run_dir>/rl_games_params.yaml), and rl_games.torch_runner.Runner. The training statistics
(EpisodeTracker), metrics.jsonl/metrics.json/tb/ and the evaluation (our Evaluator on rl-games' network) are ours,
so isaac-ppo-report puts both learners side by side on the same unlagged number. The translation, the settings
fixed here, what is refused and where rl-games' algorithm differs from ours: docs/rl-games.md; the params tree
itself: isaac_ppo/loop/rlgames_params.py.
"""
from __future__ import annotations

import glob
import inspect
import math
import os
import random
import time
from typing import Any, Dict, List, Optional

from isaac_ppo.errors import UserError
from isaac_ppo.loop.rlgames_params import ENV_NAME, build_params

MISSING = "agent=rl_games needs rl-games: pip install 'isaac-ppo[rl_games]'"
VECENV_TYPE = "ISAAC_PPO"  # rl-games' vecenv type (IsaacGymEnvs: RLGPU)


def _import_rl_games() -> Any:
    try:
        import rl_games
        from rl_games.common import env_configurations, vecenv  # noqa: F401
        from rl_games.torch_runner import Runner  # noqa: F401
    except ImportError as error:
        missing = getattr(error, "name", None) or ""
        raise UserError(MISSING if missing.split(".")[0] in ("rl_games", "") else f"{MISSING} ({error})") from None
    return rl_games


def rl_games_version() -> str:
    try:
        from importlib.metadata import version

        return version("rl-games")
    except Exception:  # not installed as a distribution (a checkout on sys.path)
        import rl_games

        return str(getattr(rl_games, "__version__", "unknown"))


def _vec_env_class() -> Any:
    """The IVecEnv adapter (made on demand: rl-games is imported only when used)."""
    from rl_games.common.ivecenv import IVecEnv

    try:
        from rl_games.common.gym_compat import spaces  # rl-games >= 1.6.5: gymnasium (gym on Python 3.8)
    except ImportError:
        from gym import spaces  # older 1.6.x

    import numpy as np

    from isaac_ppo.envs.contract import num_states
    from isaac_ppo.envs.episodes import EpisodeTracker

    class IsaacPpoVecEnv(IVecEnv):
        """Our VecEnv as rl-games sees an IsaacGymEnvs task through RLGPUEnv: obs dicts of torch tensors on the
        env's device, step -> (obs_dict, rewards, resets, extras) with extras['time_outs']. Episode returns
        and lengths are tracked here exactly as our collector tracks them."""

        def __init__(self, env: Any, window: int):
            self.env = env
            self.tracker = EpisodeTracker(env.num_envs, env.device, window)
            self.diverged = 0
            self.task_state = None  # (the last step's extras["task_state"]: the task's own state, e.g. a level)
            self.observation_space = spaces.Box(-np.inf, np.inf, (env.num_obs,), dtype=np.float32)
            self.action_space = spaces.Box(-1.0, 1.0, (env.num_actions,), dtype=np.float32)
            states = num_states(env)  # rl-games' central value reads obs["states"] (IsaacGymEnvs' RLGPUEnv's)
            self.state_space = spaces.Box(-np.inf, np.inf, (states,), dtype=np.float32) if states else None

        def step(self, actions: Any) -> Any:
            obs_dict, rewards, resets, extras = self.env.step(actions)
            self.tracker.update(rewards, resets, extras.get("diverged_envs"), extras.get("reward_terms"))
            self.diverged += int(extras.get("diverged", 0))
            self.task_state = extras.get("task_state", self.task_state)
            return obs_dict, rewards, resets, extras

        def reset(self) -> Any:
            return self.env.reset()

        def get_number_of_agents(self) -> int:
            return 1

        def get_env_info(self) -> Dict[str, Any]:
            info = {"observation_space": self.observation_space, "action_space": self.action_space,
                    "agents": 1, "value_size": 1}
            if self.state_space is not None:
                info["state_space"] = self.state_space
            return info

    return IsaacPpoVecEnv


def register_env(env: Any, window: int = 100) -> Any:
    """Register our already built env with rl-games (as IsaacGymEnvs' train.py registers RLGPUEnv); returns
    the adapter rl-games will step (its EpisodeTracker's window: the last `window` episodes)."""
    from rl_games.common import env_configurations, vecenv

    adapter = _vec_env_class()(env, window)

    def create(config_name: str, num_actors: int, **kwargs: Any) -> Any:
        if num_actors != env.num_envs:
            raise UserError(f"rl-games asked for {num_actors} actors, the env has {env.num_envs}")
        return adapter

    vecenv.register(VECENV_TYPE, create)
    env_configurations.register(ENV_NAME, {"vecenv_type": VECENV_TYPE, "env_creator": lambda **kwargs: env})
    return adapter


def _observer_class() -> Any:
    from rl_games.common.algo_observer import AlgoObserver

    class MetricsObserver(AlgoObserver):
        """Writes our metrics.jsonl row (and TensorBoard tags, progress line) once per rl-games epoch.

        rl-games hands its observer only (frame, epoch, total_time); its epoch's timings, losses, KL and
        learning rate are the arguments of ``algo.write_stats``, which this observer wraps on the agent
        instance (and calls on unchanged). It also wraps ``algo.play_steps`` to give collection our
        collect_torch_threads. A stop request ends the run at the end of the epoch it arrives in: max_epochs
        is set to that epoch, so rl-games saves its last checkpoint and returns."""

        def __init__(self, adapter: Any, logger: Any, stops: Any, collect_threads: int, update_threads: int,
                     evaluator: Any):
            super().__init__()
            self.adapter = adapter
            self.evaluator = evaluator  # isaac_ppo.loop.evaluate.Evaluator, on envs of its own
            self.logger = logger
            self.collect_threads = collect_threads
            self.update_threads = update_threads
            self.algo: Any = None
            self.stats: Dict[str, Any] = {}
            self.stops = stops  # isaac_ppo.loop.stops.StopRequests: SIGTERM, Ctrl-C, SIGUSR2
            self.epochs_logged = 0
            self.nn_dir: Optional[str] = None

        def after_init(self, algo: Any) -> None:
            self.algo = algo
            self.nn_dir = algo.nn_dir
            original_stats = algo.write_stats
            signature = inspect.signature(original_stats)

            def write_stats(*args: Any, **kwargs: Any) -> Any:
                self.stats = dict(signature.bind(*args, **kwargs).arguments)
                return original_stats(*args, **kwargs)

            algo.write_stats = write_stats

            for name in ("play_steps", "play_steps_rnn"):  # (rl-games collects with the second for an rnn)
                setattr(algo, name, self._with_collect_threads(getattr(algo, name)))

        def _with_collect_threads(self, original: Any) -> Any:
            def play_steps() -> Any:
                import torch

                torch.set_num_threads(self.collect_threads)
                try:
                    return original()
                finally:
                    torch.set_num_threads(self.update_threads)

            return play_steps

        def after_print_stats(self, frame: int, epoch_num: int, total_time: float) -> None:
            row = self.row(epoch_num, total_time)
            evaluation = self.evaluator.when_due(RlGamesPolicy(self.algo), row["env_steps"] - row["batch_size"],
                                                 row["batch_size"], row["iteration"], row["wall_s"])
            if evaluation is not None:
                row["eval"] = evaluation
            self.logger.log(row)
            self.epochs_logged += 1
            if self.stops.requested is not None:
                self.algo.max_epochs = epoch_num  # rl-games saves last_<name>_ep_<epoch_num> and returns

        def row(self, epoch_num: int, total_time: float) -> Dict[str, Any]:
            from rl_games.algos_torch import torch_ext

            algo, stats = self.algo, self.stats
            play_s, update_s = float(stats.get("play_time", math.nan)), float(stats.get("update_time", math.nan))
            step_s = float(stats.get("step_time", math.nan))
            episodes = dict(self.adapter.tracker.statistics(), diverged=self.adapter.diverged)
            if self.adapter.task_state:
                episodes["task_state"] = {name: float(v) for name, v in self.adapter.task_state.items()}
            self.adapter.diverged = 0

            def mean(key: str) -> float:
                values = stats.get(key)
                return float(torch_ext.mean_list(values).item()) if values else math.nan

            if algo.game_rewards.current_size > 0:
                rlg_return = float(algo.game_rewards.get_mean().reshape(-1)[0])
                rlg_length = float(algo.game_lengths.get_mean().reshape(-1)[0])
            else:
                rlg_return = rlg_length = math.nan
            from isaac_ppo.io.logger import iteration_row
            from isaac_ppo.scheduler import Plan

            plan = Plan(algo.num_actors, algo.horizon_length, algo.mini_epochs_num, algo.minibatch_size)
            row = iteration_row(epoch_num - 1, int(algo.frame), float(total_time), plan, int(algo.batch_size), 0,
                                episodes, collect_s=play_s, update_s=update_s, iteration_s=play_s + update_s)
            row.update({
                "rl_games_mean_return": rlg_return, "rl_games_mean_length": rlg_length,
                "env_step_s": round(step_s, 4),
                "actor_loss": mean("a_losses"), "critic_loss": mean("c_losses"), "entropy": mean("entropies"),
                "kl": mean("kls"),
                "lr": float(stats.get("last_lr", math.nan)) * float(stats.get("lr_mul", 1.0)),
                "agent": "rl_games",
            })
            return row

    return MetricsObserver


class RlGamesPolicy:
    """rl-games' network as the evaluation calls a model: obs -> (mean, log_std, value), through rl-games' own
    observation normaliser, in eval mode (the normaliser does not learn from evaluation) and without gradient.
    Actions go to the env as rl-games' training sends them: its clamp to [-1, 1] is the env's clipActions.
    A recurrent network (rl-games' rnn block) acts with step(), as our ActorCritic: its rnn_states (a tuple of
    (layers, envs, units) tensors) as one row per env, zeroed at episodes' ends (rl-games' zero_rnn_on_done)."""

    def __init__(self, algo: Any):
        self.model = algo.model
        self.recurrent = bool(self.model.is_rnn())
        self.zero_on_done = bool(getattr(algo, "zero_rnn_on_done", True))
        # each state tensor's (layers, units): rl-games' default states are (layers, its num_actors, units)
        self.parts = [(int(t.shape[0]), int(t.shape[2])) for t in self.model.get_default_rnn_state()] \
            if self.recurrent else []
        self.state_size = sum(layers * units for layers, units in self.parts)

    def __call__(self, obs: Any) -> Any:
        mu, log_std, value, _ = self._network(obs, None)
        return mu, log_std, value

    def initial_state(self, envs: int, device: Any = None) -> Any:
        import torch

        return torch.zeros(envs, self.state_size, device=device)

    def step(self, obs: Any, states: Any, hidden: Any) -> Any:
        """(mu, log_std, value, next hidden) of one step from the flat states `hidden` (envs, state_size)."""
        import torch

        envs, tensors, at = obs.shape[0], [], 0
        for layers, units in self.parts:
            size = layers * units
            tensors.append(hidden[:, at:at + size].reshape(envs, layers, units).transpose(0, 1).contiguous())
            at += size
        mu, log_std, value, new = self._network(obs, tuple(tensors))
        flat = torch.cat([t.transpose(0, 1).reshape(envs, -1) for t in new], dim=1)
        return mu, log_std, value, flat

    def _network(self, obs: Any, rnn_states: Any) -> Any:
        import torch

        training = self.model.training
        self.model.eval()
        inputs = {"obs": self.model.norm_obs(obs)}
        if rnn_states is not None:
            inputs.update(rnn_states=rnn_states, seq_length=1)
        try:
            with torch.no_grad():  # (its network returns the log-std: the model takes exp() of it)
                return self.model.a2c_network(inputs)
        finally:
            self.model.train(training)


def last_checkpoint(nn_dir: Optional[str]) -> Optional[str]:
    """rl-games' newest last_<name>_ep_N_rew_R.pth in nn_dir (written at the end of a run and every
    save_frequency epochs), else its newest checkpoint of any name."""
    if not nn_dir:
        return None
    for pattern in ("last_*.pth", "*.pth"):
        paths = glob.glob(os.path.join(nn_dir, pattern))
        if paths:
            return max(paths, key=lambda path: (os.path.getmtime(path), path))
    return None


def train_with_rl_games(cfg: Any, env: Any, run_dir: str) -> Dict[str, Any]:
    """Train cfg.task on env (our VecEnv, already built) with rl-games; returns the metrics.json summary.
    cfg is loaded (isaac_ppo.config.load): what rl-games cannot do here was refused there."""
    _import_rl_games()
    import numpy as np
    import torch
    import yaml
    from rl_games.torch_runner import Runner

    from isaac_ppo.loop.build import build_evaluator
    from isaac_ppo.io import wandb_sink
    from isaac_ppo.io.logger import RunLogger, write_config
    from isaac_ppo.loop.stops import StopRequests

    from isaac_ppo.envs.contract import num_states

    params = build_params(cfg, env.num_envs, run_dir, str(getattr(env, "device", "") or cfg.device),
                          num_states(env))
    write_config(run_dir, cfg)
    with open(os.path.join(run_dir, "rl_games_params.yaml"), "w") as f:
        f.write("# rl-games' params for this run, translated from cfg.agent by isaac_ppo/loop/rlgames.py\n")
        yaml.safe_dump({"params": params}, f, sort_keys=False)

    seed = cfg.seed  # rl-games seeds only a truthy seed: seed 0 is seeded here
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    adapter = register_env(env, cfg.agent.games_to_track)
    epochs = int(params["config"]["max_epochs"])
    logger = RunLogger(run_dir, cfg.task.name, epochs, wandb=wandb_sink.for_run(cfg, run_dir)).begin()
    stops = StopRequests("stopping rl-games at the end of this epoch")
    evaluator = build_evaluator(cfg, env)
    observer = _observer_class()(adapter, logger, stops, cfg.collect_torch_threads, cfg.torch_threads, evaluator)
    sim = env.sim.name if hasattr(env, "sim") else "isaacgym"
    print(f"[{cfg.task.name}] training with rl-games {rl_games_version()} on {sim} with {env.num_envs} envs; "
          f"results in {run_dir}")
    started = time.perf_counter()
    with stops:
        try:
            runner = Runner(algo_observer=observer)
            runner.load({"params": params})
            runner.reset()
            runner.run({"train": True, "play": False, "checkpoint": None, "sigma": None})
            extra: Dict[str, Any] = {
                "last_checkpoint": last_checkpoint(observer.nn_dir), "stopped_by": stops.requested,
                "agent": "rl_games", "rl_games_version": rl_games_version(),
                "process_s": round(time.perf_counter() - started, 3),
            }
            if evaluator.final and not stops.requested and observer.algo is not None:
                algo = observer.algo
                extra["final_eval"] = evaluator(RlGamesPolicy(algo), int(algo.frame), observer.epochs_logged - 1,
                                                logger.last.get("wall_s", 0.0))
            summary = logger.summary(dict(extra, **evaluator.solve_record()))
        finally:
            logger.close()
    if stops.requested:  # (the caller ends the process with a failure status: not finished, not resumable)
        print(f"stopped by {stops.requested} after iteration {observer.epochs_logged}; "
              f"checkpoint {summary['last_checkpoint']}")
    else:
        from isaac_ppo.loop.evaluate import describe_run

        print(f"[{cfg.task.name}] done (rl-games): {describe_run(summary, cfg.agent.games_to_track)}; "
              f"results in {run_dir}")
    return summary


__all__: List[str] = ["build_params", "register_env", "train_with_rl_games"]
