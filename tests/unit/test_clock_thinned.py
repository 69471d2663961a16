"""The study report's small per-run copies (metrics.tar.xz) and benchmarks/slim_archives.py --every thin a run's
rows with one rule (isaac_ppo.lab.report.clock.thinned): every Nth row, every evaluation or diagnostics row and the
last, each kept row carrying the seconds and divergences of the rows dropped before it, so a thinned run's
where-the-time-went sums are the full run's."""
from __future__ import annotations

import json

from isaac_ppo.lab import archive
from isaac_ppo.lab.report.clock import MAX_PLAIN_ROWS, thinned, write


def rows(n: int, evaluated=(7,)):
    out = []
    for i in range(n):
        row = {"iteration": i + 1, "env_steps": 100 * (i + 1), "wall_s": 0.5 * (i + 1), "collect_s": 0.25,
               "update_s": 0.125, "diverged": 1 if i % 5 == 0 else 0}
        if i in evaluated:
            row["eval"] = {"return_mean": float(i), "env_steps": 100 * (i + 1), "seconds": 0.0}
        out.append(row)
    return out


def test_thinned_keeps_the_rule_and_the_sums_and_leaves_the_rows_alone():
    full = rows(20)
    before = json.dumps(full)
    kept = thinned(full, 6)
    assert [row["iteration"] for row in kept] == [1, 7, 8, 13, 19, 20]  # 0, 6, 12, 18 by stride; 7 evaluated; last
    assert sum(row["collect_s"] for row in kept) == 20 * 0.25
    assert sum(row["update_s"] for row in kept) == 20 * 0.125
    assert sum(row["diverged"] for row in kept) == 4
    assert kept[1]["collect_s"] == 6 * 0.25  # row 7's own and the five dropped before it
    assert json.dumps(full) == before  # copies: the caller's rows (read once, plotted after) unchanged
    assert thinned(full, 1) == full


def test_a_report_copy_of_a_long_run_keeps_its_time_shares(tmp_path):
    folder = tmp_path / "seed_0"
    folder.mkdir()
    n = 3 * MAX_PLAIN_ROWS + 7
    with open(folder / "metrics.jsonl", "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows(n, evaluated=(10, 500)))
    study = {"name": "s", "source": "cfg/study/s.yaml", "arms": {"a": []}, "thresholds": [5.0], "common": [],
             "seeds": [0]}
    write({"a": [str(folder)]}, study, str(tmp_path / "out"))
    copy = [json.loads(line) for line in archive.read(str(tmp_path / "out" / "metrics.tar.xz"))["a_seed_0.jsonl"]
            .decode().splitlines()]
    assert len(copy) <= MAX_PLAIN_ROWS + 2 + 1  # the stride's rows, two evaluations, the last
    assert [row["iteration"] for row in copy if "eval" in row] == [11, 501]
    assert sum(row["collect_s"] for row in copy) == n * 0.25
    assert sum(row["update_s"] for row in copy) == n * 0.125
