"""The second reading of a study's final comparisons (isaac_ppo.lab.report.retest), on synthetic run folders."""
from __future__ import annotations

import json

import pytest

from isaac_ppo.lab.report.retest import second_return, write


def _evaluated_twice(tmp_path, arm, seed, final, second, second_policy=2):
    """A run folder whose final policy (version 2) was evaluated at the end (final) and, when second_policy is 2,
    by its last periodic evaluation too (second)."""
    folder = tmp_path / arm / f"seed_{seed}"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"final_eval": {"return_mean": final, "policy_version": 2}}))
    rows = [{"iteration": 0, "env_steps": 100, "eval": {"return_mean": 0.0, "policy_version": 1}},
            {"iteration": 1, "env_steps": 200, "eval": {"return_mean": second, "policy_version": second_policy}}]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(folder)


def test_the_second_evaluation_is_the_final_policy_s_and_only_that_policy_s(tmp_path):
    assert second_return(_evaluated_twice(tmp_path, "x", 0, 5.0, 3.0)) == 3.0
    # the last periodic evaluation saw an earlier policy (the budget did not end on an interval): no second look
    assert second_return(_evaluated_twice(tmp_path, "x", 1, 5.0, 3.0, second_policy=1)) is None


def test_a_final_verdict_that_the_second_evaluation_reverses_is_shown_beside_it(tmp_path):
    """Arm a is ahead on the final evaluation and behind on the second look at the same policies: retest.md shows
    both readings; the first one's verdict is the comparison's own (compare.py's), unchanged."""
    runs = {"a": [], "b": []}
    for seed, (fa, sa, fb, sb) in enumerate([(10, 1, 1, 10), (11, 2, 2, 11), (12, 1, 1, 12), (10, 2, 2, 10)]):
        runs["a"].append(_evaluated_twice(tmp_path, "a", seed, fa, sa))
        runs["b"].append(_evaluated_twice(tmp_path, "b", seed, fb, sb))
    study = {"compare": [{"claim": "1", "a": "a", "b": "b"}, {"claim": "1 (AUC)", "a": "a", "b": "b", "metric": "auc"}]}
    out = tmp_path / "report"
    out.mkdir()
    assert write(runs, study, str(out)) == [str(out / "retest.json"), str(out / "retest.md")]
    again = json.loads((out / "retest.json").read_text())
    assert again["runs"] == 8 and again["spearman"] < 0
    assert len(again["comparisons"]) == 1  # the final comparison only, not the AUC's
    first, second = again["comparisons"][0]["first"], again["comparisons"][0]["second"]
    assert first["verdict"] == "supported" and first["difference"] == pytest.approx(10.75 - 1.5)
    assert second["verdict"] == "contradicted" and second["difference"] == pytest.approx(1.5 - 10.75)
    text = (out / "retest.md").read_text()
    assert "| 1 | a vs b | a > b | +9.25 (" in text and "| supported | -9.25 (" in text and "| contradicted |" in text


def test_runs_without_a_second_evaluation_write_nothing(tmp_path):
    folder = tmp_path / "a" / "seed_0"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"final_eval": {"return_mean": 1.0}}))
    (folder / "metrics.jsonl").write_text("")
    runs = {"a": [str(folder)] * 3, "b": [str(folder)] * 3}
    out = tmp_path / "report"
    out.mkdir()
    assert write(runs, {"compare": [{"claim": "1", "a": "a", "b": "b"}]}, str(out)) == []
    assert not (out / "retest.json").exists()
