"""The whole loop in this process (no subprocess): the real Hydra composition, the builder, a small Cartpole on
real MuJoCo, the logs, the checkpoints, play and resume. What only a process can show (exit codes, signals)
stays in test_train_cli.py."""
from __future__ import annotations

import importlib.util
import json
import math
import os

import pytest
import torch

from helpers import MJWARP_WORKER, require_system
from isaac_ppo.loop.build import build_env_and_scheduler, build_runner
from isaac_ppo.distributed import Local
from isaac_ppo.errors import RunFailure, UserError
from isaac_ppo.io.checkpoint import load
from isaac_ppo.io.logger import write_config
from isaac_ppo.loop.play import play
from isaac_ppo.config.compose import compose_config

SMALL = ["task=Cartpole", "num_envs=32", "agent.minibatch_size=128", "sim=mujoco", "diagnostics=off",
         "task.env.episodeLength=20"]


def _train(tmp_path, *overrides, comm=None, resume_from=None):
    cfg = compose_config([*SMALL, *overrides])
    env, scheduler = build_env_and_scheduler(cfg)
    runner = build_runner(cfg, env, str(tmp_path), scheduler, comm=comm)
    if resume_from and not runner.resume(resume_from):
        raise UserError(f"{resume_from} is of a finished run")
    return cfg, env, runner, runner.run()


def _rows(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


CLOCKS = {"wall_s", "collect_s", "wait_s", "update_s", "iteration_s", "fps", "fps_collect", "fps_update"}


def _rows_without_clocks(run_dir):
    """The rows of a run but for what the clock measured: what two runs of the same work must share."""
    return [{k: v for k, v in row.items() if k not in CLOCKS} for row in _rows(run_dir)]


def test_train_writes_rows_checkpoints_and_a_summary(tmp_path):
    _, _, runner, summary = _train(tmp_path, "max_iterations=4", "save_interval_iterations=2")
    assert summary["iterations"] == 4 and summary["env_steps"] == 4 * 32 * 16
    assert [row["iteration"] for row in _rows(tmp_path)] == [0, 1, 2, 3]
    names = sorted(os.listdir(tmp_path / "checkpoints"))
    assert names == ["best.pt", "iter_000002.pt", "iter_000004.pt", "last.pt"]
    assert runner.iteration == 4


def test_best_pt_holds_the_policy_alone_plays_and_is_refused_for_resume(tmp_path):
    calls = []
    cfg, env, runner, summary = _train(tmp_path, "max_iterations=3", "save_interval_iterations=100")
    best, last = load(str(tmp_path / "checkpoints" / "best.pt")), load(str(tmp_path / "checkpoints" / "last.pt"))
    assert summary["final_window_mean_return"] is not None
    assert "ppo" not in best and "env" not in best and "ppo" in last
    assert set(best["model"]) == set(last["model"])
    # (play's envs: num_envs when given, as IsaacGymEnvs plays, else play_episodes)
    play_cfg = compose_config([*[o for o in SMALL if not o.startswith("num_envs=")], "test=true",
                               f"checkpoint={tmp_path}/checkpoints/best.pt", "play_episodes=4"])
    play_env, _ = build_env_and_scheduler(play_cfg)
    assert play_env.num_envs == 4
    result = play(play_cfg, play_env, str(tmp_path / "checkpoints" / "best.pt"))
    assert result["episodes"] == 4
    with pytest.raises(UserError, match=r"holds the policy alone \(best.pt\): resume from last.pt"):
        _train(tmp_path / "again", "max_iterations=4", resume_from=str(tmp_path / "checkpoints" / "best.pt"))
    # best.pt is written without building the whole training state (which waits for a batch in flight)
    original = runner.state_dict
    runner.state_dict = lambda: calls.append(1) or original()
    runner.checkpointer.best_return = -1e9
    runner.checkpointer.after_iteration(4, runner.state_dict, runner.policy_state, 0.0)
    assert calls == [] and os.path.isfile(tmp_path / "checkpoints" / "best.pt")


def test_a_concurrent_run_keeps_one_torch_thread_count_for_collection_and_update(tmp_path):
    """torch's thread count is the process's: a collection thread beside the update must not run on a count of its
    own (which count each op got became a race, and a resumed concurrent run's losses differed from the whole
    run's in their 8th digit on busy cores). A sync run still collects on collect_torch_threads."""
    threads = ["torch_threads=2", "collect_torch_threads=1", "max_iterations=1"]
    _, _, concurrent, _ = _train(tmp_path / "concurrent", "scheduler=concurrent", *threads)
    assert concurrent.batches.collect_threads == concurrent.update_threads == 2
    _, _, sync, _ = _train(tmp_path / "sync", *threads)
    assert (sync.batches.collect_threads, sync.update_threads) == (1, 2)


ON_A_GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("scheduler,sim,device", [
    ("fixed", "mujoco", "cpu"), ("concurrent", "mujoco", "cpu"),
    # HTS-RL's delayed update (agent/stale.py) reads the behaviour parameters kept with the batch
    ("concurrent+agent.stale_update=delayed", "mujoco", "cpu"),
    pytest.param("fixed", "mjwarp", "cpu",  # (slow: MuJoCo Warp's CPU device)
                 marks=[MJWARP_WORKER, pytest.mark.slow]),
    # on a GPU: the learner's tensors and generators on cuda (sim=mujoco), and MuJoCo Warp's worlds too
    pytest.param("fixed", "mujoco", "cuda", marks=ON_A_GPU), pytest.param("concurrent", "mujoco", "cuda", marks=ON_A_GPU),
    pytest.param("fixed", "mjwarp", "cuda", marks=ON_A_GPU)])
def test_resume_continues_exactly(tmp_path, scheduler, sim, device):
    """Stopped after 2 of 4 iterations and resumed from last.pt: the same rows and parameters as a run of 4, on
    either MuJoCo backend (last.pt holds the env's own state: MuJoCo Warp's too), on the CPU or a GPU."""
    if sim == "mjwarp" and importlib.util.find_spec("mujoco_warp") is None:
        require_system("sim=mjwarp needs mujoco-warp (Python >= 3.11): pip install '.[mjwarp]'")
    scheduler, *stale_learning = scheduler.split("+")
    common = ["scheduler=" + scheduler, "seed=5", "sim=" + sim, "device=" + device, *stale_learning]
    _, _, whole_runner, _ = _train(tmp_path / "whole", "max_iterations=4", *common)
    _train(tmp_path / "part", "max_iterations=2", *common)
    part = load(str(tmp_path / "part" / "checkpoints" / "last.pt"))
    if scheduler == "concurrent":
        # the run ended at iteration 2: no batch was collected ahead, the policy that would have collected it is kept
        assert part["pending"] is None and part["behaviour"] is not None
    _, _, runner, resumed = _train(tmp_path / "part", "max_iterations=4", *common,
                                   resume_from=str(tmp_path / "part" / "checkpoints" / "last.pt"))
    assert resumed["iterations"] == 4
    rows = _rows_without_clocks(tmp_path / "whole")
    again = _rows_without_clocks(tmp_path / "part")
    assert again == rows
    assert [row["staleness"] for row in again] == ([0, 1, 1, 1] if scheduler == "concurrent" else [0, 0, 0, 0])
    for name, value in whole_runner.model.state_dict().items():
        assert torch.equal(value, runner.model.state_dict()[name]), name


class TwoRanksOnThisMachine(Local):
    """One process standing in for one of two ranks sharing the machine's cores (nothing else differs)."""

    local_world_size = 2


def test_the_update_keeps_its_share_of_the_cores(tmp_path):
    """train.py split torch_threads between the ranks on a machine; the loop must not set it back each step."""
    before = torch.get_num_threads()
    try:
        _train(tmp_path, "max_iterations=2", "torch_threads=2", comm=TwoRanksOnThisMachine())
        assert torch.get_num_threads() == 1  # 2 threads shared by 2 ranks
        _train(tmp_path / "alone", "max_iterations=2", "torch_threads=2")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def _all_finite(state) -> bool:
    if isinstance(state, torch.Tensor):
        return not state.is_floating_point() or bool(torch.isfinite(state).all())
    if isinstance(state, dict):
        return all(_all_finite(value) for value in state.values())
    if isinstance(state, (list, tuple)):
        return all(_all_finite(value) for value in state)
    return True


def test_a_diverging_update_is_stopped_before_anything_non_finite_is_written(tmp_path):
    """With a learning rate of 1e3 a step of the first update turns the parameters non-finite (a finite loss, a
    huge step): the run stops at the next minibatch naming the parameter, and the checkpoints already in its
    folder (from a good run before it) are left finite and unchanged. (Not a resume: a resumed run keeps its
    checkpoint's learning rate.)"""
    _train(tmp_path, "max_iterations=2", "save_interval_iterations=1")
    before = {name: (tmp_path / "checkpoints" / name).read_bytes() for name in os.listdir(tmp_path / "checkpoints")}
    with pytest.raises(UserError, match=r"non-finite parameter \S+ after an optimizer step .*training stopped"):
        _train(tmp_path, "max_iterations=30", "agent.learning_rate=1e3", "agent.lr_schedule=constant",
               "save_interval_iterations=1")
    after = {name: (tmp_path / "checkpoints" / name).read_bytes() for name in os.listdir(tmp_path / "checkpoints")}
    assert after == before
    for name in after:
        assert _all_finite(load(str(tmp_path / "checkpoints" / name))), name


def test_an_update_that_ends_non_finite_stops_the_run_unsaved(tmp_path):
    """The last step of an update leaving a NaN (injected here) is caught after the update, before the row is
    logged or anything saved, naming the parameter."""
    cfg = compose_config([*SMALL, "max_iterations=3", "save_interval_iterations=1"])
    env, scheduler = build_env_and_scheduler(cfg)
    runner = build_runner(cfg, env, str(tmp_path), scheduler)
    update = runner.ppo.update

    def update_then_nan(*args, **kwargs):
        stats = update(*args, **kwargs)
        with torch.no_grad():
            runner.model.mu.weight[0, 0] = math.nan
        return stats

    runner.ppo.update = update_then_nan
    with pytest.raises(UserError, match=r"non-finite parameter mu.weight after the update of iteration 0: training "
                                        r"stopped"):
        runner.run()
    assert not os.path.exists(tmp_path / "checkpoints") and _rows(tmp_path) == []


def test_a_checkpoint_never_holds_a_non_finite_tensor(tmp_path):
    """The last guard, whatever the source: a NaN anywhere in a state is refused by name and nothing is written."""
    from isaac_ppo.io.checkpoint import Checkpointer

    checkpointer = Checkpointer(str(tmp_path), save_interval_iterations=1)
    with pytest.raises(UserError, match=r"non-finite ppo.optimizer.state.0.exp_avg in the state for last.pt"):
        checkpointer.save("last.pt", {"ppo": {"optimizer": {"state": {0: {"exp_avg": torch.tensor([1.0, math.nan])}}}}})
    assert not os.path.exists(tmp_path / "checkpoints" / "last.pt")


def test_a_torn_last_row_does_not_stop_the_resume_in_place(tmp_path):
    """A crash or a full disk mid-write leaves half a row: the resume in place drops it and redoes the iteration."""
    _train(tmp_path, "max_iterations=2")
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"iteration": 2, "env_steps": 15')  # torn
    _, _, _, summary = _train(tmp_path, "max_iterations=3", resume_from=str(tmp_path / "checkpoints" / "last.pt"))
    assert summary["iterations"] == 3
    assert [row["iteration"] for row in _rows(tmp_path)] == [0, 1, 2]


def test_resume_auto_continues_only_a_run_of_this_config(tmp_path):
    """resume=auto skips the newest run when it is another seed's, and refuses (naming the difference) when no run
    is this config's; a directory holding another config's run refuses to be continued in place."""
    from isaac_ppo.loop.resume import resume_point

    runs = tmp_path / "runs"
    common = [f"runs_dir={runs}", "experiment=e", "max_iterations=1"]
    seed3, _, _, _ = _train(runs / "e" / "a", *common, "seed=3")
    write_config(str(runs / "e" / "a"), seed3)
    seed2, _, _, _ = _train(runs / "e" / "b", *common, "seed=2")  # newer, another seed
    write_config(str(runs / "e" / "b"), seed2)
    asked = compose_config([*SMALL, *common, "seed=3", "resume=auto", "max_iterations=5"])  # a budget may grow
    assert resume_point(asked, str(tmp_path / "new")) == str(runs / "e" / "a" / "checkpoints" / "last.pt")
    other = compose_config([*SMALL, *common, "seed=4", "resume=auto"])
    with pytest.raises(UserError, match=r"resume=auto found 2 run\(s\) of e, none with this config \(the newest: "
                                        r"seed=2 there, 4 here\)"):
        resume_point(other, str(tmp_path / "new"))
    with pytest.raises(UserError, match=r"holds another run \(seed=3 there, 4 here\)"):
        resume_point(compose_config([*SMALL, *common, "seed=4"]), str(runs / "e" / "a"))
    assert resume_point(compose_config([*SMALL, *common, "seed=3"]), str(runs / "e" / "a")).endswith("last.pt")


def test_a_run_continues_in_place_at_another_physics_thread_count_and_steps_the_same(tmp_path):
    """task.mujoco.nthread is the machine's (a cut study run relaunched pinned to one core): the folder's run
    continues at another count, and what it learns from is the same bit for bit: 1 iteration at 2 threads
    continued to 2 at 1 logs the rows and ends at the parameters of a whole run at 1 thread."""
    from isaac_ppo.loop.resume import resume_point

    _, _, whole_runner, _ = _train(tmp_path / "whole", "max_iterations=2", "task.mujoco.nthread=1")
    cut, _, _, _ = _train(tmp_path / "part", "max_iterations=1", "task.mujoco.nthread=2")
    write_config(str(tmp_path / "part"), cut)
    relaunched = compose_config([*SMALL, "max_iterations=2", "task.mujoco.nthread=1"])
    start = resume_point(relaunched, str(tmp_path / "part"))
    assert start == str(tmp_path / "part" / "checkpoints" / "last.pt")
    _, _, runner, _ = _train(tmp_path / "part", "max_iterations=2", "task.mujoco.nthread=1", resume_from=start)
    assert _rows_without_clocks(tmp_path / "part") == _rows_without_clocks(tmp_path / "whole")
    for name, value in whole_runner.model.state_dict().items():
        assert torch.equal(value, runner.model.state_dict()[name]), name


def test_exploding_physics_stops_the_run_naming_the_scale_keys(tmp_path):
    """A motor a billion times too strong makes nearly every Cartpole simulation diverge: the run stops after
    the first iteration's row (which records the divergences) with one line naming the share and the task's
    scale keys, before any checkpoint of the exploded run is written."""
    with pytest.raises(UserError, match=r"diverged in \d+ of \d+ episodes .*max_diverged_fraction=0\.05.*"
                                        r"task\.env\.maxEffort=1e\+09") as error:
        _train(tmp_path, "max_iterations=5", "save_interval_iterations=1", "task.env.maxEffort=1e9")
    assert "\n" not in str(error.value)
    rows = _rows(tmp_path)
    assert len(rows) == 1 and rows[0]["diverged"] > 0.9 * rows[0]["episodes"]
    assert not os.path.exists(tmp_path / "checkpoints")


def test_divergences_under_the_limit_are_shown_and_summed(tmp_path, capsys):
    """Allowed (max_diverged_fraction=1), the divergences are in the progress line and the summary."""
    _, _, _, summary = _train(tmp_path, "max_iterations=2", "task.env.maxEffort=1e9", "max_diverged_fraction=1")
    rows = _rows(tmp_path)
    assert summary["diverged"] == sum(row["diverged"] for row in rows) > 0
    assert f"diverged {rows[0]['diverged']:,}" in capsys.readouterr().out


def test_leftover_tmp_files_are_removed_at_the_next_start(tmp_path):
    """A kill mid-save leaves `<name>.tmp` beside intact files (the rename never happened): the next start in the
    folder removes them, and a finished run is refused for resume instead of being copied into a new folder."""
    _train(tmp_path, "max_iterations=2")
    for name in ("checkpoints/last.pt.tmp", "checkpoints/iter_000002.pt.tmp", "metrics.json.tmp"):
        (tmp_path / name).write_bytes(b"half a file")
    cfg = compose_config([*SMALL, "max_iterations=2"])
    env, scheduler = build_env_and_scheduler(cfg)
    assert build_runner(cfg, env, str(tmp_path / "other"), scheduler).resume(
        str(tmp_path / "checkpoints" / "last.pt")) is False  # its budget is used up: nothing to run
    _train(tmp_path, "max_iterations=3", resume_from=str(tmp_path / "checkpoints" / "last.pt"))
    assert not list(tmp_path.rglob("*.tmp"))
    assert [row["iteration"] for row in _rows(tmp_path)] == [0, 1, 2]


def test_a_failed_write_keeps_last_pt_when_the_state_is_at_a_logged_row(tmp_path):
    """A checkpoint write that fails (here: its folder replaced by a file, as a vanished mount would) ends the
    run with one RunFailure line; last.pt of the last logged iteration is attempted, and says so."""
    cfg = compose_config([*SMALL, "max_iterations=4", "save_interval_iterations=2"])
    env, scheduler = build_env_and_scheduler(cfg)
    runner = build_runner(cfg, env, str(tmp_path), scheduler)
    save = runner.checkpointer.save

    def fail_numbered(name, state):
        if name.startswith("iter_"):
            raise RunFailure(f"cannot write {name}: No space left on device")
        return save(name, state)

    runner.checkpointer.save = fail_numbered
    with pytest.raises(RunFailure, match=r"cannot write iter_000002.pt: No space left on device; saved \S+last.pt "
                                         r"at iteration 2: free space, then resume=auto continues the run"):
        runner.run()
    assert load(str(tmp_path / "checkpoints" / "last.pt"))["counters"]["iteration"] == 2
    assert [row["iteration"] for row in _rows(tmp_path)] == [0, 1]


def test_a_run_resumed_into_new_folders_is_one_run_to_the_report(tmp_path):
    """Stopped at 2 iterations, continued to 3 and then to 4 with resume=auto (three folders): the report sees one
    complete run with rows 0-3 (the first folder's rows before the second's start, and so on) beside a seed run
    done in one go, and resume= is no setting of its own."""
    from helpers import train_in_process

    from isaac_ppo.lab.report import gather

    runs = tmp_path / "runs"
    common = [*SMALL, "experiment=chain", "diagnostics=default", "diagnostics.plot=false"]
    first = train_in_process(runs, *common, "seed=1", "max_iterations=2").run_dir
    with open(os.path.join(first, "metrics.jsonl"), "a") as f:  # a row logged after last.pt, then a kill
        f.write(json.dumps(dict(_rows(first)[-1], iteration=2, env_steps=3 * 512)) + "\n")
    train_in_process(runs, *common, "seed=1", "max_iterations=3", "resume=auto")
    last = train_in_process(runs, *common, "seed=1", "max_iterations=4", "resume=auto").run_dir
    train_in_process(runs, *common, "seed=2", "max_iterations=4")
    report = gather([str(runs / "chain")])
    assert len(report.runs) == 2 and len(report.groups) == 1, (report.swept, [run.path for run in report.runs])
    (chain,) = [run for run in report.runs if run.path == last]
    assert [row["iteration"] for row in chain.rows] == [0, 1, 2, 3] and chain.complete
    assert len(chain.parts) == 2 and chain.parts[0] == first
    assert [row["env_steps"] for row in chain.rows] == [512, 1024, 1536, 2048]


def test_another_network_is_refused_in_one_line_for_resume_play_and_initial_weights(tmp_path):
    _train(tmp_path, "max_iterations=1")
    last = str(tmp_path / "checkpoints" / "last.pt")
    refusal = r"checkpoint \S+ holds another network \(\S+: \(\d+(, \d+)?\) there, \(\d+(, \d+)?\) here\): use that " \
              r"run's agent.network settings \(its run had: agent.network.hidden=\[32,32\] agent.network.activation="
    with pytest.raises(UserError, match=refusal):
        _train(tmp_path / "wider", "max_iterations=2", "agent.network.hidden=[48,48]", resume_from=last)
    with pytest.raises(UserError, match=refusal):
        cfg = compose_config([*SMALL, "test=true", f"checkpoint={last}", "play_episodes=2",
                              "agent.network.hidden=[48,48]"])
        play(cfg, build_env_and_scheduler(cfg)[0], last)
    with pytest.raises(UserError, match=r"holds another network \(\S+ absent there\)"):
        _train(tmp_path / "deeper", "max_iterations=2", "agent.network.hidden=[32,32,32]", resume_from=last)


def test_periodic_and_final_evaluation_land_in_rows_tensorboard_summary_and_best_pt(tmp_path):
    """eval.interval_env_steps=1024 with 512 env steps an iteration: an evaluation after every second update, on 8 eval envs
    each counting its first episode; best.pt is the policy of the best evaluation; metrics.json holds the final
    one; training is the same as without evaluation."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, _, runner, summary = _train(tmp_path / "eval", "max_iterations=4", "eval.interval_env_steps=1024", "eval.num_envs=8",
                                   "task.solve_thresholds=[0,1e9]")
    rows = _rows(tmp_path / "eval")
    assert ["eval" in row for row in rows] == [False, True, False, True]
    evaluation = rows[1]["eval"]
    assert evaluation["episodes"] == 8 and evaluation["env_steps"] == 1024 and evaluation["policy_version"] == 2
    low, high = evaluation["return_ci95"]
    assert low <= evaluation["return_iqm"] <= high and evaluation["length_mean"] > 0
    best_row = max((row for row in rows if "eval" in row), key=lambda row: row["eval"]["return_mean"])
    assert load(str(tmp_path / "eval" / "checkpoints" / "best.pt"))["counters"]["iteration"] == best_row["iteration"] + 1
    assert summary["final_eval"]["episodes"] == 8 and summary["final_eval"]["env_steps"] == 4 * 512
    # time to solve: the first evaluation at or over each threshold, at the training's wall clock plus evaluations'
    first = rows[1]["eval"]
    assert first["wall_s"] == pytest.approx(rows[1]["wall_s"] + first["seconds"], abs=2e-3)
    assert rows[3]["eval"]["wall_s"] > rows[3]["wall_s"] + rows[3]["eval"]["seconds"]  # the first one counts too
    assert summary["solve_times"] == [{"threshold": 0.0, "seconds": first["wall_s"], "env_steps": 1024},
                                      {"threshold": 1e9, "seconds": None, "env_steps": None}]
    with open(tmp_path / "eval" / "metrics.json") as f:
        assert json.load(f)["final_eval"]["return_mean"] == summary["final_eval"]["return_mean"]
    events = EventAccumulator(str(tmp_path / "eval" / "tb"))
    events.Reload()
    assert [e.step for e in events.Scalars("eval/return_mean")] == [1024, 2048]
    _train(tmp_path / "plain", "max_iterations=4", "eval.interval_env_steps=0", "eval.final=false")
    for with_eval, without in zip(rows, _rows(tmp_path / "plain")):
        assert with_eval["actor_loss"] == without["actor_loss"] and with_eval["kl"] == without["kl"]


@pytest.mark.parametrize("scheduler", ["fixed", "concurrent"])
def test_the_update_trains_under_normalisers_that_already_hold_its_batch(tmp_path, monkeypatch, scheduler):
    """The observation and value normalisers fold the batch in before the update, so the policy and critic it
    trains are the ones that act next (folded in after it, every rollout ran a policy shifted by statistics it was
    never trained under: benchmarks/history/ballbalance.md, "isaac-ppo's gap to rl-games on BallBalance traced and
    closed"). Seen from inside the update: the normalisers' sample count already includes this batch, and after it
    nothing changes them until the next update."""
    from isaac_ppo.agent.ppo import PPO

    seen = []
    real_update = PPO.update

    def watched(self, buffer, plan, stale=False, behaviour=None):
        model = self.model
        seen.append((float(model.obs_norm.count), float(model.value_norm.count), plan.batch_size))
        return real_update(self, buffer, plan, stale, behaviour)

    monkeypatch.setattr(PPO, "update", watched)
    _, _, runner, _ = _train(tmp_path, "max_iterations=3", "scheduler=" + scheduler)
    counts = [(obs, value) for obs, value, _ in seen]
    batch = seen[0][2]
    # (the count starts at RunningMeanStd's epsilon, 1e-5)
    assert [round(obs) for obs, _ in counts] == [batch, 2 * batch, 3 * batch]
    assert [round(value) for _, value in counts] == [batch, 2 * batch, 3 * batch]
    assert round(float(runner.model.obs_norm.count)) == 3 * batch  # nothing folded in after the last update


def test_agent_normalizer_update_after_update_folds_the_batch_in_after_the_update(tmp_path, monkeypatch):
    """agent.normalizer_update=after_update (the order before 2026-11-28, rsl_rl's): the update trains under
    normalisers that have not seen its batch, and the batch is folded in once the update is done."""
    from isaac_ppo.agent.ppo import PPO

    seen = []
    real_update = PPO.update

    def watched(self, buffer, plan, stale=False, behaviour=None):
        seen.append((round(float(self.model.obs_norm.count)), round(float(self.model.value_norm.count)),
                     plan.batch_size))
        return real_update(self, buffer, plan, stale, behaviour)

    monkeypatch.setattr(PPO, "update", watched)
    _, _, runner, _ = _train(tmp_path, "max_iterations=3", "agent.normalizer_update=after_update")
    batch = seen[0][2]
    assert [(obs, value) for obs, value, _ in seen] == [(0, 0), (batch, batch), (2 * batch, 2 * batch)]
    assert round(float(runner.model.obs_norm.count)) == 3 * batch
