"""The study report's clock view when the runs ran on more than one machine kind: seconds from different machines
are never compared in one table without a table per machine beside it (PROTOCOL of paper_ant, amendment 2)."""
from __future__ import annotations

import json

import pytest

from isaac_ppo.lab.report.clock import machine_label, write

FAST = {"cpu": "Fast CPU", "vector": ["avx2", "avx512f"], "cores": 2, "torch": "2.13.0+cpu"}
SLOW = {"cpu": "Slow CPU", "vector": ["avx2"], "cores": 2, "torch": "2.13.0+cpu"}


def run_folder(tmp_path, name, seconds_per_iteration):
    """A run whose evaluation return passes 3000 at its third iteration, at 3 x seconds_per_iteration."""
    folder = tmp_path / name
    folder.mkdir()
    with open(folder / "metrics.jsonl", "w") as f:
        for i, value in enumerate((1000.0, 2000.0, 3500.0), start=1):
            f.write(json.dumps({"iteration": i, "env_steps": 1000 * i, "wall_s": seconds_per_iteration * i,
                                "eval": {"return_mean": value, "env_steps": 1000 * i, "seconds": 0.0}}) + "\n")
    return str(folder)


def test_runs_on_two_machine_kinds_get_a_clock_table_each(tmp_path):
    runs = {"a": [run_folder(tmp_path, "a0", 10.0), run_folder(tmp_path, "a1", 20.0)],
            "b": [run_folder(tmp_path, "b0", 11.0), run_folder(tmp_path, "b1", 22.0)]}
    machine_of = {runs["a"][0]: FAST, runs["b"][0]: FAST, runs["a"][1]: SLOW, runs["b"][1]: SLOW}
    study = {"name": "two", "source": "two.yaml", "thresholds": [3000], "arms": {"a": [], "b": []}, "common": [],
             "seeds": [0, 1]}
    out = tmp_path / "report"
    write(runs, study, str(out), [FAST, SLOW], (), machine_of)
    summary = json.loads((out / "study.json").read_text())
    assert summary["arms"]["a"]["to_3000_s"] == [30.0, 60.0]  # (pooled: the main table)
    fast, slow = machine_label(FAST), machine_label(SLOW)
    assert set(summary["by_machine"]) == {fast, slow}
    assert summary["by_machine"][fast]["a"]["to_3000_s"] == [30.0]
    assert summary["by_machine"][fast]["b"]["to_3000_s"] == [33.0]
    assert summary["by_machine"][slow]["b"]["to_3000_s"] == [66.0]
    text = (out / "study.md").read_text()
    assert "2 machine kinds" in text and f"On {fast} only:" in text and f"On {slow} only:" in text


def test_runs_on_one_machine_kind_get_one_table(tmp_path):
    runs = {"a": [run_folder(tmp_path, "a0", 10.0), run_folder(tmp_path, "a1", 12.0)]}
    out = tmp_path / "report"
    write(runs, {"name": "one", "source": "one.yaml", "thresholds": [3000], "arms": {"a": []}, "common": [],
                 "seeds": [0, 1]}, str(out), [FAST], (), {f: FAST for f in runs["a"]})
    assert json.loads((out / "study.json").read_text())["by_machine"] == {}
    assert "only:" not in (out / "study.md").read_text()


def test_a_machine_label_names_the_cpu_its_vector_units_and_cores():
    assert machine_label(FAST) == "Fast CPU, avx2+avx512f, 2 cores"
    assert machine_label(None) == "(not recorded)"


def test_the_rest_of_the_clock_is_never_below_zero():
    """Timers that overlap the clock by a few ms (or the shares' rounding) once printed a "-0%" rest."""
    from isaac_ppo.lab.report.clock import summarise_arm

    rows = [{"iteration": 1, "env_steps": 1000, "wall_s": 10.0, "collect_s": 7.006, "update_s": 3.006}]
    shares = summarise_arm([rows], [3000], [])["time_shares"]
    assert shares["rest"] == 0.0 and shares["collect"] + shares["update"] == pytest.approx(1.002)
