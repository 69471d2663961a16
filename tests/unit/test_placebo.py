"""The placebo of a run's schedule (isaac_ppo/lab/report/placebo.py) and isaac-ppo-study placebo."""
from __future__ import annotations

import json
import os

import pytest

from isaac_ppo.lab import study
from isaac_ppo.errors import UserError
from isaac_ppo.lab.report.placebo import changes_of, placebo_breakpoints, placebo_overrides
from isaac_ppo.scheduler import build_scheduler
from isaac_ppo.config.compose import compose_config

B = 8192


def _rows(splits):
    """Metrics rows of an adaptive run at B = 8192 whose num_envs per iteration are `splits`."""
    return [{"iteration": k, "num_envs": n, "rollout_length": B // n, "batch_size": B, "minibatch_size": B // 2,
             "mode": "sync"} for k, n in enumerate(splits)]


ADAPTIVE = [128] * 30 + [256] * 25 + [512] * 20 + [256] * 25  # up, up, down: three changes in 100 iterations


def test_the_placebo_makes_the_same_changes_in_order_at_other_iterations():
    changes = changes_of(_rows(ADAPTIVE))
    assert changes == [(0, 128), (30, 256), (55, 512), (75, 256)]
    points = placebo_breakpoints(changes, len(ADAPTIVE), draw=3)
    assert points[0] == [0, 128] and [v for _, v in points[1:]] == [256, 512, 256]
    times = [at for at, _ in points[1:]]
    assert times == sorted(set(times)) and 1 <= times[0] and times[-1] <= 99
    assert times != [30, 55, 75]
    assert placebo_breakpoints(changes, 100, draw=3) == points  # the draw is its seed
    assert placebo_breakpoints(changes, 100, draw=4) != points


def test_the_overrides_compose_into_a_schedule_of_those_splits_at_the_run_s_batch():
    words = placebo_overrides(_rows(ADAPTIVE), draw=0, pool=512)
    assert words[:4] == ["scheduler=schedule", "scheduler.mode=sync", f"scheduler.batch_size={B}",
                         "scheduler.minibatches=2"] and words[-1] == "num_envs=512"
    cfg = compose_config(["task=Cartpole", "agent.horizon=64", *words])
    assert cfg.num_envs == 512  # (the adaptive run's pool: its ladder's top rung)
    scheduler = build_scheduler(cfg)
    plans = [scheduler.plan_at(k) for k in range(100)]
    assert {p.batch_size for p in plans} == {B} and {p.minibatch_size for p in plans} == {B // 2}
    placebo = [p.num_envs for p in plans]
    changes = changes_of([{"iteration": k, "num_envs": n} for k, n in enumerate(placebo)])
    assert [n for _, n in changes] == [128, 256, 512, 256] and changes[0] == (0, 128)
    assert placebo != ADAPTIVE  # the same changes, at other iterations


def test_a_run_whose_batch_grew_has_no_placebo_of_one_batch():
    rows = _rows([128] * 5)
    rows[3]["batch_size"] = 2 * B
    with pytest.raises(UserError, match=r"batch size changed \(\[8192, 16384\]\)"):
        placebo_overrides(rows, 0)
    with pytest.raises(UserError, match="no rows yet"):
        placebo_overrides([], 0)


def test_isaac_ppo_study_placebo_prints_an_arm_for_a_finished_run(tmp_path, capsys):
    path = tmp_path / "audit.yaml"
    path.write_text("common: [task=Cartpole]\narms:\n  adaptive: [scheduler=adaptive, scheduler.min_dwell=10, "
                    "num_envs=512, agent.mini_epochs=3]\nseeds: [0, 1]\n")
    folder = tmp_path / "runs" / "study" / "audit" / "runs" / "adaptive" / "seed_1"
    os.makedirs(folder)
    with open(folder / "metrics.jsonl", "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in _rows(ADAPTIVE))
    (folder / "config.yaml").write_text("task:\n  name: Cartpole\nnum_envs: 512\n")
    base = ["placebo", str(path), f"runs_dir={tmp_path / 'runs'}"]
    assert study.main(base + ["arm=adaptive", "seed=1"]) == 2  # not finished yet
    assert "holds no finished run" in capsys.readouterr().err
    (folder / "study_done.json").write_text("{}")
    assert study.main(base + ["arm=adaptive", "seed=1"]) == 0
    name, _, words = capsys.readouterr().out.strip().partition(": ")
    # the arm's other overrides are kept; its schedule and pool come from the run
    assert name == "placebo_adaptive_seed_1"
    assert json.loads(words) == ["agent.mini_epochs=3"] + placebo_overrides(_rows(ADAPTIVE), 1, 512)
    assert study.main(base + ["arm=adaptive", "seed=1", "draw=7"]) == 0
    assert json.loads(capsys.readouterr().out.partition(": ")[2]) == \
        ["agent.mini_epochs=3"] + placebo_overrides(_rows(ADAPTIVE), 7, 512)
    assert study.main(base + ["arm=fixed", "seed=1"]) == 2
    assert "placebo needs arm=, one of the study's: adaptive" in capsys.readouterr().err
    assert study.main(base + ["arm=adaptive", "seed=x"]) == 2
    assert "seed='x' is outside its domain: an integer" in capsys.readouterr().err
    assert study.main(base + ["arm=adaptive"]) == 2
    assert "placebo needs seed=S" in capsys.readouterr().err
