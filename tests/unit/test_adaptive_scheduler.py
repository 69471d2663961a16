"""The adaptive scheduler: its ladder, its refusals, and the closed loop on synthetic diagnostic streams."""
from __future__ import annotations

import inspect
import json
import math
import random
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest
import torch
import yaml

import isaac_ppo.cfg
from isaac_ppo.errors import UserError
from isaac_ppo.scheduler.adaptive import AdaptiveScheduler
from isaac_ppo.scheduler.plan import Plan, build_scheduler, check_plans, pool_size

BASE = Plan(4096, 16, 4, 32768)  # B = 65536, 2 minibatches
WIDE = dict(min_num_envs=512, max_num_envs=4096)  # ladder 512, 1024, 2048, 4096
Stream = Callable[[int], Tuple[Dict[str, Any], Dict[str, Any]]]  # k -> (stats, diag)


def run(s: AdaptiveScheduler, stream: Stream, iterations: int, start: int = 0) -> Tuple[List[int], List[int]]:
    """Drive s as the runner does (plan(k), then observe(k)); the num_envs of every plan and the iterations
    at which a move was decided (observe(k) moved, so plan(k + 1) differs)."""
    sizes, moves = [], []
    for k in range(start, start + iterations):
        before = s.plan(k, [])
        assert s.plan(k, []) is before  # plan is a pure function of the state
        sizes.append(before.num_envs)
        stats, diag = stream(k)
        s.observe(k, stats, diag)
        if s.plan(k + 1, []).num_envs != before.num_envs:
            moves.append(k)
    return sizes, moves


def split(plan: Plan) -> Tuple[int, int, int, int]:
    return plan.num_envs, plan.rollout_length, plan.epochs, plan.minibatch_size


# ------------------------------------------------------------------------------------------ ladder


def test_default_ladder_keeps_the_batch():
    s = AdaptiveScheduler(BASE)
    assert s.ladder == [1024, 2048, 4096]
    plans = list(s.reachable_plans(100, None))
    assert [split(p) for p in plans] == [(1024, 64, 4, 32768), (2048, 32, 4, 32768), (4096, 16, 4, 32768)]
    assert all(p.batch_size == 65536 and p.num_minibatches == 2 and p.mode == "sync" for p in plans)
    assert s.plan(0, []) == plans[0]  # starts at min_num_envs
    for p in plans:
        assert p.check(4096) is p


def test_explicit_ladder_batch_and_minibatches():
    s = AdaptiveScheduler(BASE, mode="concurrent", batch_size=32768, minibatches=4, start_num_envs=1024, **WIDE)
    plans = list(s.reachable_plans(100, None))
    assert [split(p) for p in plans] == [
        (512, 64, 4, 8192), (1024, 32, 4, 8192), (2048, 16, 4, 8192), (4096, 8, 4, 8192)
    ]
    assert all(p.batch_size == 32768 and p.mode == "concurrent" for p in plans)
    assert s.plan(0, []) == plans[1]


def test_factor_four_and_without_keeping_the_batch():
    assert AdaptiveScheduler(BASE, factor=4).ladder == [1024, 4096]
    s = AdaptiveScheduler(BASE, keep_batch_size=False, **WIDE)
    plans = list(s.reachable_plans(100, None))
    assert [split(p) for p in plans] == [
        (512, 16, 4, 4096), (1024, 16, 4, 8192), (2048, 16, 4, 16384), (4096, 16, 4, 32768)
    ]
    assert [p.batch_size for p in plans] == [8192, 16384, 32768, 65536]


def test_one_rung_ladder():
    s = AdaptiveScheduler(BASE, min_num_envs=4096)
    assert [split(p) for p in s.reachable_plans(10, None)] == [(4096, 16, 4, 32768)]
    _, moves = run(s, lambda k: ({"kl": 1.0}, {"feature_rank": 50.0 * 0.9 ** k}), 100)
    assert moves == []


def test_pool_and_checks_through_the_config():
    path = Path(isaac_ppo.cfg.__file__).parent / "scheduler" / "adaptive.yaml"
    node = yaml.safe_load(path.read_text())
    assert node.pop("_target_") == "isaac_ppo.scheduler.adaptive.AdaptiveScheduler"
    params = inspect.signature(AdaptiveScheduler.__init__).parameters
    defaults = {name: p.default for name, p in params.items() if name not in ("self", "base")}
    assert node == defaults  # every constructor argument, with its default

    from omegaconf import OmegaConf

    cfg = OmegaConf.create({
        "num_envs": None,
        "task": {"env": {"numEnvs": 4096}},
        "agent": {"horizon": 16, "mini_epochs": 4, "minibatch_size": 32768},
        "scheduler": dict(yaml.safe_load(path.read_text()), min_num_envs=512),
    })
    s = build_scheduler(cfg)
    assert isinstance(s, AdaptiveScheduler) and s.ladder == [512, 1024, 2048, 4096]
    pool = pool_size(cfg, s, 100, None)
    assert pool == 4096
    check_plans(s, pool, 100, None)
    with pytest.raises(UserError, match="num_envs=4096 must be within 1..2048"):
        check_plans(s, 2048, 100, None)


@pytest.mark.parametrize("kwargs, match", [
    (dict(min_num_envs=4096, max_num_envs=1024), r"scheduler\.min_num_envs=4096 is above scheduler\.max_num_envs=1024"),
    (dict(min_num_envs=768, max_num_envs=3072), r"scheduler\.min_num_envs=768.*num_envs=768 does not divide the batch size 65536"),
    (dict(batch_size=2048), r"num_envs=4096 does not divide the batch size 2048 \(scheduler\.batch_size"),
    (dict(min_num_envs=1000, max_num_envs=4000, batch_size=6000), r"num_envs=4000 does not divide the batch size 6000"),
    (dict(start_num_envs=3000), r"scheduler\.start_num_envs=3000 is not on the ladder 1024, 2048, 4096"),
    (dict(start_num_envs=8192), r"scheduler\.start_num_envs=8192 is not on the ladder"),
    (dict(factor=1), r"scheduler\.factor=1 must be at least 2"),
    (dict(factor=2.5), r"scheduler\.factor=2\.5 must be an integer"),
    (dict(factor=True), r"scheduler\.factor=True must be an integer"),
    (dict(factor=3), r"scheduler\.max_num_envs=4096 is not scheduler\.min_num_envs=1024 times a power of scheduler\.factor=3"),
    (dict(min_num_envs=0), r"scheduler\.min_num_envs=0 must be at least 1"),
    (dict(keep_batch_size=False, batch_size=65536), r"scheduler\.batch_size=65536 applies only with scheduler\.keep_batch_size=true"),
    (dict(keep_batch_size="yes"), r"scheduler\.keep_batch_size='yes' must be true or false"),
    (dict(minibatches=3), r"3 minibatches \(scheduler\.minibatches"),
    (dict(ema=0.0), r"scheduler\.ema=0\.0 must be within \(0, 1\]"),
    (dict(warmup=0), r"scheduler\.warmup=0 must be at least 1"),
    (dict(min_dwell=-1), r"scheduler\.min_dwell=-1 must be at least 0"),
    (dict(rank_drop=1.0), r"scheduler\.rank_drop=1\.0 must be within \[0, 1\)"),
    (dict(ess_low=0.9), r"scheduler\.ess_low=0\.9 is above scheduler\.ess_high=0\.8"),
    (dict(kl_low=0.1), r"scheduler\.kl_low=0\.1 is above scheduler\.kl_high=0\.05"),
    (dict(kl_high=float("nan")), r"scheduler\.kl_high=nan must be a finite number"),
])
def test_refusals_name_the_key(kwargs, match):
    with pytest.raises(UserError, match=match):
        AdaptiveScheduler(BASE, **kwargs)


def test_refuses_a_default_bottom_rung_of_zero():
    with pytest.raises(UserError, match=r"scheduler\.min_num_envs=null takes num_envs // 4"):
        AdaptiveScheduler(Plan(2, 8, 1, 16))


# ------------------------------------------------------------------------------------------ moves up


def falling_rank(k: int) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    rank = 50.0 if k < 10 else 50.0 * 0.98 ** (k - 10)
    return {"kl": 0.008}, {"feature_rank": rank}


def test_falling_rank_moves_up_after_each_dwell_and_stops_at_the_top():
    s = AdaptiveScheduler(BASE, **WIDE)
    sizes, moves = run(s, falling_rank, 300)
    assert moves == [20, 40, 60]
    assert sizes[20] == 512 and sizes[21] == 1024  # decided after iteration 20's update, used from 21
    assert sizes[41] == 2048 and sizes[61] == 4096
    assert set(sizes[61:]) == {4096}
    assert all(b // a in (1, 2) for a, b in zip(sizes, sizes[1:]))  # one rung at a time, only up
    assert s.plan(300, []).rollout_length == 16
    events = s.take_events()
    assert len(events) == 4  # three moves, then one line (not one per iteration) at the top
    assert events[0].startswith(
        "iteration 20: num_envs 512 -> 1024, rollout_length 128 -> 64: feature_rank "
    )
    assert "fell below 0.9 x 50" in events[0]
    assert events[2].startswith("iteration 60: num_envs 2048 -> 4096, rollout_length 32 -> 16: feature_rank")
    assert events[3].startswith("iteration 80: staying at the top rung num_envs 4096")
    assert s.take_events() == []


def test_stress_at_the_top_rung_stays_there():
    s = AdaptiveScheduler(BASE, start_num_envs=4096)
    sizes, moves = run(s, falling_rank, 200)
    assert moves == [] and set(sizes) == {4096}
    events = s.take_events()
    assert len(events) == 1 and "staying at the top rung num_envs 4096" in events[0]


def test_rising_dormancy_moves_up_once():
    s = AdaptiveScheduler(BASE)
    stream = lambda k: ({}, {"dormant_fraction": 0.1 if k < 10 else 0.2})
    sizes, moves = run(s, stream, 200)
    assert moves == [20]  # the reference is re-taken at 0.2 on the move: no further rise
    assert sizes[-1] == 2048
    (event,) = s.take_events()
    assert event.startswith("iteration 20: num_envs 1024 -> 2048, rollout_length 64 -> 32: dormant_fraction 0.19")
    assert event.endswith("rose above 0.1 + 0.05")


@pytest.mark.parametrize("stats, diag, reason", [
    ({"kl": 0.1}, {}, "kl 0.1 rose above 0.05"),
    ({"kl": 0.008}, {"ess": 0.3}, "ess 0.3 fell below 0.5"),
])
def test_high_kl_or_low_ess_moves_up(stats, diag, reason):
    s = AdaptiveScheduler(BASE)
    _, moves = run(s, lambda k: (stats, diag), 30)
    assert moves == [20]
    (event,) = s.take_events()
    assert event.endswith(reason)


# ------------------------------------------------------------------------------------------ moves down


def recovering(kl: float) -> Stream:
    def stream(k: int) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        early = k < 5
        return {"kl": kl}, {"feature_rank": 40.0 if early else 50.0, "dormant_fraction": 0.2 if early else 0.1}
    return stream


def test_recovered_rank_and_low_dormancy_move_down_to_the_bottom():
    s = AdaptiveScheduler(BASE, start_num_envs=4096)
    sizes, moves = run(s, recovering(kl=0.005), 300)
    assert moves == [20]  # refs re-taken at the move: the signals are flat afterwards
    assert sizes[0] == 4096 and sizes[-1] == 2048
    (event,) = s.take_events()
    assert event.startswith("iteration 20: num_envs 4096 -> 2048, rollout_length 16 -> 32: feature_rank")
    assert "rose above 1.1 x 40" in event and "dormant_fraction" in event and "kl 0.005 below 0.01" in event

    # rank that keeps recovering walks down to the bottom rung and stays there
    s = AdaptiveScheduler(BASE, start_num_envs=4096)
    sizes, moves = run(s, lambda k: ({}, {"feature_rank": 20.0 * 1.02 ** k}), 300)
    assert moves == [20, 40]
    assert set(sizes[41:]) == {1024}
    assert len(s.take_events()) == 2  # nothing logged at the bottom


def test_relief_needs_every_measured_signal_healthy():
    s = AdaptiveScheduler(BASE, start_num_envs=4096)
    _, moves = run(s, recovering(kl=0.02), 300)  # kl in the band: not clearly healthy
    assert moves == [] and s.take_events() == []
    s = AdaptiveScheduler(BASE, start_num_envs=4096)
    _, moves = run(s, lambda k: ({}, {"feature_rank": 40.0 if k < 5 else 50.0, "dormant_fraction": 0.2}), 300)
    assert moves == []  # rank recovered, dormancy flat


def test_kl_and_ess_alone_never_move_down():
    s = AdaptiveScheduler(BASE, start_num_envs=4096)
    sizes, moves = run(s, lambda k: ({"kl": 0.001}, {"ess": 0.95}), 300)
    assert moves == [] and set(sizes) == {4096} and s.take_events() == []


# ------------------------------------------------------------------------------------------ no oscillation


def test_noise_around_a_constant_never_moves():
    rng = random.Random(1234)

    def noisy(k: int) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        jitter = lambda value: value * (1.0 + rng.uniform(-0.05, 0.05))
        return {"kl": jitter(0.02)}, {
            "feature_rank": jitter(50.0), "dormant_fraction": jitter(0.2), "ess": jitter(0.65)
        }

    s = AdaptiveScheduler(BASE, start_num_envs=2048, **WIDE)
    sizes, moves = run(s, noisy, 500)
    assert moves == [] and set(sizes) == {2048} and s.take_events() == []


@pytest.mark.parametrize("ema, min_dwell", [(0.3, 20), (1.0, 20), (1.0, 7), (0.5, 1)])
def test_alternating_stress_and_relief_is_bounded_by_the_dwell(ema, min_dwell):
    stress = {"feature_rank": 10.0, "dormant_fraction": 0.6, "ess": 0.2}
    relief = {"feature_rank": 100.0, "dormant_fraction": 0.0, "ess": 1.0}
    stream = lambda k: ({"kl": 0.2 if k % 2 else 0.001}, stress if k % 2 else relief)
    iterations = 500
    s = AdaptiveScheduler(BASE, ema=ema, min_dwell=min_dwell, start_num_envs=1024, **WIDE)
    sizes, moves = run(s, stream, iterations)
    assert moves  # the stream does move it ...
    assert len(moves) <= iterations // min_dwell  # ... but no more often than the dwell allows
    assert moves[0] >= min_dwell
    assert all(b - a >= min_dwell for a, b in zip(moves, moves[1:]))
    assert all(b in (a, a * 2, a // 2) for a, b in zip(sizes, sizes[1:]))
    events = s.take_events()
    assert len([e for e in events if "->" in e]) == len(moves)
    assert all("->" in e or "staying at the top" in e for e in events)


# ------------------------------------------------------------------------------------------ missing data


def test_empty_or_non_finite_values_change_nothing():
    s = AdaptiveScheduler(BASE, **WIDE)
    _, moves = run(s, lambda k: ({}, {}), 300)
    assert moves == [] and s.take_events() == []
    assert all(v["count"] == 0 and v["ema"] is None for v in s.state_dict()["signals"].values())

    s = AdaptiveScheduler(BASE, **WIDE)
    run(s, lambda k: ({"kl": 0.008}, {"feature_rank": 50.0, "dormant_fraction": 0.1}), 5)
    before = s.state_dict()
    junk = [
        ({}, {}),
        ({"kl": float("nan")}, {"feature_rank": float("nan"), "dormant_fraction": float("inf")}),
        ({"kl": None}, {"feature_rank": "50", "dormant_fraction": True, "ess": [0.5]}),
        ({"kl": torch.tensor([0.1, 0.2])}, {"ess": -float("inf")}),
    ]
    for i, (stats, diag) in enumerate(junk):
        s.observe(5 + i, stats, diag)  # within the dwell
    assert s.state_dict() == before and s.take_events() == []

    # a finite tensor scalar is a number like any other
    s.observe(9, {"kl": torch.tensor(0.008)}, {"feature_rank": torch.tensor(50.0, dtype=torch.float64)})
    after = s.state_dict()["signals"]
    assert after["kl"]["count"] == 6 and after["feature_rank"]["count"] == 6
    assert after["feature_rank"]["ema"] == pytest.approx(50.0)


def test_sparse_diagnostics_still_decide():
    # diagnostics measured every 10th iteration only (warmup: 0, 10, 20): the EMA moves only then
    stream = lambda k: ({}, {"feature_rank": 50.0 if k < 30 else 30.0} if k % 10 == 0 else {})
    s = AdaptiveScheduler(BASE, **WIDE)
    _, moves = run(s, stream, 100)
    # 30: 44 < 0.9 x 50. The EMA still lags the step when the ref is re-taken, so the rest of the 40% drop
    # moves again once it exceeds 10% of the new ref (50: 35.9 < 0.9 x 44; 80: 31.5 < 0.9 x 35.9).
    assert moves == [30, 50, 80]


# ------------------------------------------------------------------------------------------ state


def mixed(k: int) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Rank flat, falling, flat, recovering; measured every other iteration; KL healthy every iteration."""
    if k < 60:
        rank = 50.0
    elif k < 120:
        rank = 50.0 - 25.0 * (k - 60) / 60
    elif k < 220:
        rank = 25.0
    else:
        rank = min(60.0, 25.0 + 35.0 * (k - 220) / 60)
    rank *= 1.0 + 0.02 * math.sin(k)
    return {"kl": 0.005 + 0.001 * math.cos(k)}, ({"feature_rank": rank} if k % 2 == 0 else {})


def plain(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(key, str) and plain(v) for key, v in value.items())
    if isinstance(value, list):
        return all(plain(v) for v in value)
    return value is None or type(value) in (int, float, bool, str)


def test_state_dict_round_trip_continues_identically():
    kwargs = dict(min_dwell=15, **WIDE)
    a = AdaptiveScheduler(BASE, **kwargs)
    _, early = run(a, mixed, 200)
    assert early  # it moved up before the snapshot
    a.take_events()
    state = a.state_dict()
    assert plain(state)
    b = AdaptiveScheduler(BASE, **kwargs)
    b.load_state_dict(json.loads(json.dumps(state)))
    assert b.state_dict() == state
    assert b.plan(200, []) == a.plan(200, [])

    sizes_a, moves_a = run(a, mixed, 200, start=200)
    sizes_b, moves_b = run(b, mixed, 200, start=200)
    assert moves_a  # and down again after it
    assert (sizes_a, moves_a) == (sizes_b, moves_b)
    assert a.take_events() == b.take_events()
    assert a.state_dict() == b.state_dict()

    # the snapshot is a copy: feeding the original does not change it
    assert state != a.state_dict()


def test_load_refuses_a_rung_off_the_ladder():
    a = AdaptiveScheduler(BASE, start_num_envs=4096)
    b = AdaptiveScheduler(BASE, min_num_envs=512, max_num_envs=2048)
    with pytest.raises(UserError, match=r"num_envs=4096, not on this run's ladder 512, 1024, 2048"):
        b.load_state_dict(a.state_dict())
    fresh = b.state_dict()
    b.load_state_dict({})  # a checkpoint of a scheduler without state (fixed): start afresh
    assert b.state_dict() == fresh
