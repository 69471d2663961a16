"""The adaptive scheduler's rule replayed on a fixed run's rows (isaac_ppo/lab/report/audit.py): it flags stress exactly
where the live scheduler would have moved, and the study's predict ranks runs by it."""
from __future__ import annotations

import json
import math

import pytest

from isaac_ppo.lab.report.audit import ADAPTIVE_STRESS, stress_share
from isaac_ppo.lab.report.compare import predict
from isaac_ppo.scheduler.adaptive import AdaptiveScheduler
from isaac_ppo.scheduler.plan import Plan

B = 65536


def _rows(n=60, rank=lambda k: 40.0, kl=lambda k: 0.01, every=4, num_envs=1024):
    """A fixed run's rows: KL every iteration, diagnostics every `every` iterations (as diagnostics.interval_iterations)."""
    rows = []
    for k in range(n):
        row = {"iteration": k, "env_steps": (k + 1) * B, "num_envs": num_envs, "rollout_length": B // num_envs,
               "epochs": 4, "minibatch_size": B // 2, "kl": kl(k)}
        if k % every == 0:
            row["diagnostics"] = {"feature_rank": rank(k), "dormant_fraction": 0.1, "ess": 0.9}
        rows.append(row)
    return rows


def test_steady_diagnostics_are_never_stress():
    assert stress_share(_rows(), cut_env_steps=math.inf) == 0.0


def test_the_replay_flags_stress_where_the_live_scheduler_first_moves():
    rows = _rows(rank=lambda k: 40.0 if k < 24 else 20.0)  # feature rank halves at iteration 24
    live = AdaptiveScheduler(Plan(1024, 64, 4, B // 2), min_num_envs=1024, max_num_envs=2048, min_dwell=0)
    first_move = None
    for row in rows:
        live.observe(row["iteration"], row, row.get("diagnostics", {}))
        if first_move is None and live.num_envs == 2048:
            first_move = row["iteration"]
    assert first_move == 24
    shares = [stress_share(rows, cut_env_steps=(k + 1) * B) for k in range(len(rows))]
    assert shares[23] == 0.0 and shares[24] == pytest.approx(1 / 25)  # first stressed at 24, the same iteration
    # from then on the replay stays stressed (its reference is not re-taken: it never moves)
    assert shares[-1] == pytest.approx((60 - 24) / 60)


def test_a_high_kl_alone_is_stress_after_the_warmup():
    share = stress_share(_rows(n=10, kl=lambda k: 0.2), cut_env_steps=math.inf)
    assert share == pytest.approx(8 / 10)  # the KL's EMA counts from its third observation (warmup 3)
    assert stress_share(_rows(n=10, kl=lambda k: 0.2), cut_env_steps=B / 2) is None  # no row that early


def test_predict_ranks_runs_by_the_stress_share(tmp_path):
    """Three runs: the more of its first 30% a run spends under stress, the lower its final return."""
    folders = []
    for i, (drop_at, final) in enumerate(((6, 1000.0), (20, 2000.0), (100, 3000.0))):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        rows = _rows(n=100, rank=lambda k, d=drop_at: 40.0 if k < d else 20.0)
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / "metrics.json").write_text(json.dumps({"final_eval": {"return_mean": final}}))
        folders.append(str(folder))
    out = predict({"arm": folders}, {"diagnostics": [ADAPTIVE_STRESS, "feature_rank"], "at_fraction": 0.3}, reps=200)
    stress, rank = out
    assert stress["diagnostic"] == ADAPTIVE_STRESS and stress["runs"] == 3
    assert stress["spearman"] == pytest.approx(-1.0)
    assert stress["distinct"] == 3 and rank["distinct"] == 2
    assert rank["spearman"] == pytest.approx(math.sqrt(3) / 2)  # at 30% the ranks are 20, 20, 40: a tie


def test_a_diagnostic_the_same_in_every_run_is_said_so_not_a_nan(tmp_path):
    """No dormant unit in any run (the paper_ant study at tau 0.025): predict says the signal ranks nothing, and
    compare.json stays strict JSON (a NaN there is not JSON)."""
    folders = []
    for i, final in enumerate((1000.0, 2000.0, 3000.0)):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows(n=20)))
        (folder / "metrics.json").write_text(json.dumps({"final_eval": {"return_mean": final}}))
        folders.append(str(folder))
    dormant, = predict({"arm": folders}, {"diagnostics": ["dormant_fraction"], "at_fraction": 0.3}, reps=50)
    assert dormant["spearman"] is None and dormant["p_permutation"] is None
    assert dormant["note"] == "the same in every run (0.1): it ranks nothing" and dormant["distinct"] == 1
    json.dumps(dormant, allow_nan=False)
    few, = predict({"arm": folders[:2]}, {"diagnostics": ["feature_rank"], "at_fraction": 0.3}, reps=50)
    assert few["spearman"] is None and few["note"] == "2 runs measured it (needs 3)"


def test_a_sampled_p_value_counts_the_observed_order_and_is_never_zero(tmp_path):
    """Twelve runs ranked perfectly by feature rank: no sampled permutation matches |rho| = 1 (2 of 12! orders do),
    so the p-value is the observed order's own share, 1 / (reps + 1), not a 0 a table would print as 0.000."""
    folders = []
    for i in range(12):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        rows = _rows(n=20, rank=lambda k, i=i: 10.0 + i)
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / "metrics.json").write_text(json.dumps({"final_eval": {"return_mean": 1000.0 * i}}))
        folders.append(str(folder))
    rank, = predict({"arm": folders}, {"diagnostics": ["feature_rank"], "at_fraction": 0.3}, reps=200)
    assert rank["spearman"] == pytest.approx(1.0)
    assert rank["p_permutation"] == pytest.approx(1 / 201) and rank["p_holm"] == pytest.approx(1 / 201)
