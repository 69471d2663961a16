"""Evaluation's protocol against the one play used before: on an env whose episode lengths vary (and whose return
is its length), each env's first episode from reset estimates the true mean within its CI; the first N episodes to
end over the same envs do not (short episodes end first, and again)."""
from __future__ import annotations

import pytest
import torch

from isaac_ppo.loop.evaluate import first_episodes, summarise

SHORT, LONG = 10, 100  # episode lengths, each drawn with probability 1/2 at every reset: true mean return 55


class VariableLengthEnv:
    """Reward 1 per step; each episode lasts SHORT or LONG steps, drawn at its reset (the VecEnv contract)."""

    num_obs, num_actions, max_episode_length = 1, 1, LONG

    def __init__(self, num_envs: int, seed: int):
        self.num_envs, self.device = num_envs, torch.device("cpu")
        self.generator = torch.Generator().manual_seed(seed)
        self.length = torch.zeros(num_envs, dtype=torch.long)
        self.t = torch.zeros(num_envs, dtype=torch.long)

    def _draw(self, ids):
        coin = torch.rand(len(ids), generator=self.generator) < 0.5
        self.length[ids] = torch.where(coin, torch.tensor(SHORT), torch.tensor(LONG))
        self.t[ids] = 0

    def reset(self):
        self._draw(torch.arange(self.num_envs))
        return {"obs": torch.zeros(self.num_envs, 1)}

    def step(self, actions):
        self.t += 1
        resets = self.t >= self.length
        self._draw(resets.nonzero().flatten())
        return ({"obs": torch.zeros(self.num_envs, 1)}, torch.ones(self.num_envs), resets,
                {"time_outs": resets.clone()})


def policy(obs):
    return torch.zeros(obs.shape[0], 1)


def first_n_to_end(env, wanted):
    """play's protocol before: step the pool until `wanted` episodes have ended, average them."""
    running, returns = torch.zeros(env.num_envs, dtype=torch.float64), []
    obs = env.reset()["obs"]
    while len(returns) < wanted:
        obs_dict, rewards, resets, _ = env.step(policy(obs))
        running += rewards
        ended = resets.nonzero().flatten()
        returns += running[ended].tolist()
        running[ended] = 0.0
        obs = obs_dict["obs"]
    return sum(returns[:wanted]) / wanted


def test_first_episodes_are_unbiased_and_first_to_end_is_not():
    true_mean = (SHORT + LONG) / 2
    for seed in range(5):
        episodes = first_episodes(VariableLengthEnv(400, seed), policy)
        assert torch.equal(episodes["returns"], episodes["lengths"].double())  # one episode each, whole
        stats = summarise(episodes["returns"], episodes["lengths"], seed=seed)
        assert stats["episodes"] == 400
        assert abs(stats["return_mean"] - true_mean) < 9  # 4 sd of the mean (45 / sqrt(400) = 2.25)
        low, high = stats["return_ci95"]
        assert low <= true_mean <= high
        # the old protocol on the same envs: the first 400 episodes to end are mostly short ones, far below
        old = first_n_to_end(VariableLengthEnv(400, seed), 400)
        assert old < low and old < true_mean - 25, (old, low)


def test_the_ci_covers_the_true_iqm_of_a_known_distribution():
    """With returns 10 or 100 at 1/2 each the IQM of many episodes is between them; the CI is ordered and holds
    the sample's IQM."""
    episodes = first_episodes(VariableLengthEnv(200, 7), policy)
    stats = summarise(episodes["returns"], episodes["lengths"], seed=0)
    low, high = stats["return_ci95"]
    assert low <= stats["return_iqm"] <= high
    assert SHORT <= low <= high <= LONG
    assert stats["length_mean"] == float(episodes["lengths"].double().mean())


def test_diverged_episodes_are_counted_apart_and_left_out():
    returns = torch.tensor([10.0, 20.0, -1.8e7, 30.0], dtype=torch.float64)
    lengths = torch.tensor([5, 6, 7, 8])
    stats = summarise(returns, lengths, diverged=torch.tensor([False, False, True, False]))
    assert stats["episodes"] == 3 and stats["diverged"] == 1
    assert stats["return_mean"] == 20.0 and stats["length_mean"] == 19 / 3
    nothing = summarise(returns, lengths, diverged=torch.ones(4, dtype=torch.bool))
    assert nothing["episodes"] == 0 and nothing["return_mean"] != nothing["return_mean"]  # NaN: no sample


class MeasuredEnv(VariableLengthEnv):
    """VariableLengthEnv whose step reports a measure (extras["measures"]): the step's number in its episode, so that
    an episode of L steps averages (L + 1) / 2."""

    def step(self, actions):
        step_number = (self.t + 1).double()
        obs, rewards, resets, extras = super().step(actions)
        return obs, rewards, resets, dict(extras, measures={"step_number": step_number})


def test_a_tasks_step_measures_are_averaged_over_each_first_episode_then_over_episodes():
    episodes = first_episodes(MeasuredEnv(64, 3), policy)
    lengths = episodes["lengths"].double()
    torch.testing.assert_close(episodes["measures"]["step_number"], (lengths + 1) / 2)
    diverged = torch.zeros(64, dtype=torch.bool)
    diverged[0] = True  # (a diverged episode's measure is left out, as its return)
    stats = summarise(episodes["returns"], episodes["lengths"], diverged=diverged, measures=episodes["measures"])
    assert stats["step_number"] == pytest.approx(float(((lengths[1:] + 1) / 2).mean()))
    assert "step_number" not in summarise(episodes["returns"], episodes["lengths"])  # (a task without measures)


class OutcomeEnv(VariableLengthEnv):
    """VariableLengthEnv whose step reports an outcome (extras["outcomes"]): 1 on the step that ends a SHORT episode
    (a success that ends it early, as FrankaCabinet's opened drawer), 0 on every other step."""

    def step(self, actions):
        short = self.length == SHORT
        obs, rewards, resets, extras = super().step(actions)
        return obs, rewards, resets, dict(extras, outcomes={"succeeded": (resets & short).double()})


def test_a_tasks_outcomes_are_read_at_each_first_episodes_end_and_averaged_to_a_rate():
    episodes = first_episodes(OutcomeEnv(64, 3), policy)
    short = episodes["lengths"] == SHORT
    assert 0 < int(short.sum()) < 64  # (both kinds of episode among the first ones)
    torch.testing.assert_close(episodes["measures"]["succeeded"], short.double())  # its value at the end, not a mean
    stats = summarise(episodes["returns"], episodes["lengths"], measures=episodes["measures"])
    assert stats["succeeded"] == pytest.approx(float(short.double().mean()))


def _evaluator(stochastic, seed=5):
    from isaac_ppo.envs import make
    from isaac_ppo.loop.evaluate import Evaluator

    return Evaluator(make("Cartpole", 8, sim="mujoco", seed=seed), 1000, True, stochastic, seed)


def test_the_stochastic_evaluation_samples_from_its_own_stream_and_resumes_exactly():
    from isaac_ppo.agent.model import ActorCritic

    torch.manual_seed(0)
    model = ActorCritic(4, 1, [16], init_log_std=0.0)
    global_stream = torch.random.get_rng_state()
    evaluator = _evaluator(stochastic=True)
    first = evaluator(model, env_steps=1000, iteration=0)
    assert torch.equal(torch.random.get_rng_state(), global_stream)  # nothing drawn from the training streams
    deterministic = _evaluator(stochastic=False)(model, env_steps=1000, iteration=0)
    for key in ("return_mean", "length_mean", "episodes"):  # the mean-action part is the same evaluation
        assert first[key] == deterministic[key], key
    sampled = first["stochastic"]
    assert sampled["episodes"] == 8 and sampled["return_mean"] != first["return_mean"]  # the noise acts
    # a resumed run's evaluator continues both streams (resets and noise) as the uninterrupted one
    state = evaluator.state_dict()
    resumed = _evaluator(stochastic=True, seed=99)
    resumed.load_state_dict(state)
    again, continued = evaluator(model, 2000, 1), resumed(model, 2000, 1)
    assert again["stochastic"] == continued["stochastic"] and again["return_mean"] == continued["return_mean"]
    assert again["stochastic"]["return_mean"] != sampled["return_mean"]  # new noise, new resets


def test_time_to_solve_counts_evaluation_time_and_resumes():
    from isaac_ppo.agent.model import ActorCritic
    from isaac_ppo.envs import make
    from isaac_ppo.loop.evaluate import Evaluator

    torch.manual_seed(0)
    model = ActorCritic(4, 1, [16])
    evaluator = Evaluator(make("Cartpole", 8, sim="mujoco", seed=1), 1000, True, thresholds=(0.0, 1e9))
    first = evaluator(model, env_steps=1000, iteration=0, wall_s=10.0)
    assert first["wall_s"] == pytest.approx(10.0 + first["seconds"], abs=2e-3)
    second = evaluator(model, env_steps=2000, iteration=1, wall_s=20.0)
    assert second["wall_s"] == pytest.approx(20.0 + first["seconds"] + second["seconds"], abs=3e-3)
    assert evaluator.solve_times() == [{"threshold": 0.0, "seconds": first["wall_s"], "env_steps": 1000},
                                       {"threshold": 1e9, "seconds": None, "env_steps": None}]
    resumed = Evaluator(make("Cartpole", 8, sim="mujoco", seed=1), 1000, True, thresholds=(0.0, 1e9))
    resumed.load_state_dict(evaluator.state_dict())
    assert resumed.solve_times() == evaluator.solve_times() and resumed.spent_s == evaluator.spent_s



class SetOutcomeEnv:
    """Episodes of 3 steps whose outcome `opened` (read at the last step, as FrankaCabinet's drawer_opened) is 1 in
    the first `opened_envs` envs, 0 in the others: the evaluation's mean of it is opened_envs / num_envs."""

    num_obs, num_actions, max_episode_length = 1, 1, 3

    def __init__(self, num_envs: int):
        self.num_envs, self.device, self.opened_envs = num_envs, torch.device("cpu"), 0
        self.t = torch.zeros(num_envs, dtype=torch.long)

    def reset(self):
        self.t.zero_()
        return {"obs": torch.zeros(self.num_envs, 1)}

    def step(self, actions):
        self.t += 1
        resets = self.t >= 3
        self.t[resets] = 0
        opened = (torch.arange(self.num_envs) < self.opened_envs).float()
        return ({"obs": torch.zeros(self.num_envs, 1)}, torch.ones(self.num_envs), resets,
                {"time_outs": resets.clone(), "outcomes": {"opened": opened}})

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_time_to_solve_by_a_measure_records_its_first_evaluation_at_each_threshold_and_resumes():
    from isaac_ppo.loop.evaluate import Evaluator

    def model(obs):
        return torch.zeros(len(obs), 1), torch.zeros(len(obs), 1)

    env = SetOutcomeEnv(4)
    evaluator = Evaluator(env, 1000, True, thresholds=(3.0,), measure_thresholds={"opened": (0.5, 0.9)})
    env.opened_envs = 1
    first = evaluator(model, env_steps=1000, iteration=0, wall_s=5.0)
    env.opened_envs = 2
    second = evaluator(model, env_steps=2000, iteration=1, wall_s=9.0)
    assert (first["opened"], second["opened"], first["return_mean"]) == (0.25, 0.5, 3.0)
    # the return's threshold at the first evaluation, the measure's 0.5 at the second, its 0.9 never
    assert evaluator.solve_times() == [{"threshold": 3.0, "seconds": first["wall_s"], "env_steps": 1000}]
    assert evaluator.measure_solve_times() == [
        {"measure": "opened", "threshold": 0.5, "seconds": second["wall_s"], "env_steps": 2000},
        {"measure": "opened", "threshold": 0.9, "seconds": None, "env_steps": None}]
    env.opened_envs = 4
    evaluator(model, env_steps=3000, iteration=2, wall_s=12.0)
    assert [e["env_steps"] for e in evaluator.measure_solve_times()] == [2000, 3000]  # (0.5 keeps its first)
    resumed = Evaluator(SetOutcomeEnv(4), 1000, True, thresholds=(3.0,), measure_thresholds={"opened": (0.5, 0.9)})
    resumed.load_state_dict(evaluator.state_dict())
    assert resumed.solve_record() == evaluator.solve_record() == {
        "solve_times": evaluator.solve_times(), "measure_solve_times": evaluator.measure_solve_times()}


def test_a_task_without_solve_measures_records_no_measure_solve_times_and_old_checkpoints_load():
    from isaac_ppo.loop.evaluate import Evaluator

    evaluator = Evaluator(SetOutcomeEnv(2), 1000, True, thresholds=(1.0,))
    assert list(evaluator.solve_record()) == ["solve_times"]
    with_measures = Evaluator(SetOutcomeEnv(2), 1000, True, measure_thresholds={"opened": (0.5,)})
    state = with_measures.state_dict()
    del state["eval_clock"]["solved_measures"]  # (a checkpoint written before solve_measures)
    with_measures.load_state_dict(state)
    assert with_measures.measure_solve_times() == [
        {"measure": "opened", "threshold": 0.5, "seconds": None, "env_steps": None}]


def test_a_runs_last_line_shows_its_measure_of_success_beside_the_return():
    from isaac_ppo.loop.evaluate import describe_run

    final = {"episodes": 64, "return_mean": 618.26, "return_iqm": 669.5, "return_ci95": [590.1, 710.4],
             "drawer_opened": 1.0, "drawer_opening_m": 0.31}
    summary = {"final_eval": final, "final_window_mean_return": 3961.6,
               "measure_solve_times": [{"measure": "drawer_opened", "threshold": t} for t in (0.5, 0.9)]}
    line = describe_run(summary, 100)
    assert line.startswith("evaluation over 64 episodes: mean return 618.26, IQM 669.50 (95% CI 590.10 to 710.40), "
                           "drawer_opened 1; training return 3961.60")
    assert "drawer_opening_m" not in line  # (a measure that marks no success stays in the rows)
    assert ", drawer_opened" not in describe_run(dict(summary, measure_solve_times=[]), 100)


def test_a_runs_last_line_says_no_episode_finished_instead_of_nan():
    """A short run whose envs ended no episode has an empty window (NaN in the row): its last line says so."""
    from isaac_ppo.loop.evaluate import describe_run

    for empty in (float("nan"), None):
        line = describe_run({"final_window_mean_return": empty}, 100)
        assert "nan" not in line and line.startswith("training return n/a (no episode finished)")
