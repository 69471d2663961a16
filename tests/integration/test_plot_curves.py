"""benchmarks/plot_curves.py: a run and its resume (each in a folder of its own, the resume's config.yaml naming the
checkpoint it continues) are one curve; other runs stay runs of their own."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_rows(folder, iterations, evaluate_at=(), resume=""):
    os.makedirs(os.path.join(folder, ".hydra"))
    with open(os.path.join(folder, ".hydra", "overrides.yaml"), "w") as f:
        f.write("[]\n")
    with open(os.path.join(folder, "config.yaml"), "w") as f:
        f.write(f"seed: 0\nresume: '{resume}'\n")
    with open(os.path.join(folder, "metrics.jsonl"), "w") as f:
        for i in iterations:
            row = {"iteration": i, "env_steps": 100 * (i + 1), "wall_s": 10.0 * (i + 1), "num_envs": 10,
                   "rollout_length": 10, "window_mean_return": float(i), "task_state": {"terrain_level": i / 10}}
            if i in evaluate_at:
                row["eval"] = {"episodes": 4, "return_mean": float(i), "env_steps": 100 * (i + 1),
                               "wall_s": 10.0 * (i + 1)}
            f.write(json.dumps(row) + "\n")


@pytest.mark.parametrize("mode", [[], ["--eval"]])
def test_a_resumed_run_is_one_curve_and_its_later_piece_wins(tmp_path, mode):
    pytest.importorskip("matplotlib")
    first, resumed = tmp_path / "exp_seed0" / "2026-11-28_00-51-49", tmp_path / "exp_seed0" / "2026-11-28_03-45-43"
    write_rows(str(first), range(0, 6), evaluate_at=(2,))
    # resumed from iteration 4: its 4 and 5 replace the first's
    write_rows(str(resumed), range(4, 9), evaluate_at=(6,), resume=str(first / "checkpoints" / "last.pt"))
    other = tmp_path / "other" / "seed_1"
    write_rows(str(other), range(0, 3), evaluate_at=(1,))
    out = tmp_path / "curves.png"
    done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "plot_curves.py"), *mode, str(out),
                           str(resumed), str(first), str(other)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if not line.startswith("mean")]
    assert [line.split(":")[0] for line in lines] == ["exp_seed0", "other"]  # two runs, not three
    if mode:
        assert "return_mean 6.000 at 700 env steps" in lines[0] and "terrain_level 0.800 at 900" in lines[0]
    else:
        assert "final 8.0" in lines[0] and "900 env steps" in lines[0]
    assert out.stat().st_size > 0
