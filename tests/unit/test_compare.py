"""The statistics of a study's comparisons (isaac_ppo.lab.report.compare), against answers known by hand."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from isaac_ppo.lab.report.compare import format_p, bootstrap_difference_ci, permutation_p, spearman, verdict


def test_the_permutation_test_is_exact_for_small_arms():
    a, b = [5.0, 6.0, 7.0], [1.0, 2.0, 3.0]
    # of the 20 ways to pick 3 of 6, only the split itself and its mirror are as extreme: p = 2/20
    assert permutation_p(a, b) == pytest.approx(2 / 20)
    # the same by brute force on a messier sample
    a, b = [3.1, 0.2, 2.5, 4.0], [1.0, 1.5, 0.1, 2.2]
    pooled, observed = a + b, abs(np.mean(a) - np.mean(b))
    count = sum(abs(np.mean([pooled[i] for i in c]) - np.mean([pooled[i] for i in range(8) if i not in c]))
                >= observed - 1e-12 for c in itertools.combinations(range(8), 4))
    assert permutation_p(a, b) == pytest.approx(count / math.comb(8, 4))
    assert permutation_p([1.0, 1.0], [1.0, 1.0]) == 1.0  # no difference: every relabelling as extreme


def test_a_sampled_permutation_p_counts_the_observed_labelling_and_is_never_zero():
    # 20 + 20 values: C(40, 20) relabellings are too many to enumerate, so 2,000 are sampled; none is as extreme
    # as two arms that do not overlap, and the p-value is the observed labelling's own share
    a, b = [100.0 + i for i in range(20)], [float(i) for i in range(20)]
    assert permutation_p(a, b, limit=2000) == pytest.approx(1 / 2001)
    assert format_p(1 / 2001) == "5.0e-04" and format_p(0.0123) == "0.012"


def test_the_bootstrap_ci_brackets_the_difference_and_shrinks_with_the_spread():
    rng = np.random.default_rng(0)
    a, b = 10 + rng.normal(0, 1, 50), 8 + rng.normal(0, 1, 50)
    low, high = bootstrap_difference_ci(a, b)
    assert low < np.mean(a) - np.mean(b) < high and low > 1.2 and high < 2.8
    wide = bootstrap_difference_ci(10 + rng.normal(0, 5, 50), 8 + rng.normal(0, 5, 50))
    assert wide[1] - wide[0] > 3 * (high - low)


def test_the_verdict_reads_the_ci_against_the_expected_direction():
    assert verdict(0.5, 2.0, "greater") == "supported"
    assert verdict(0.5, 2.0, "less") == "contradicted"
    assert verdict(-2.0, -0.5, "less") == "supported"
    assert verdict(-0.5, 2.0, "greater") == "inconclusive at this budget"


def test_spearman_is_the_rank_correlation_with_ties_averaged():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 45]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties: ranks x = (1, 2.5, 2.5, 4), y = (1, 2, 3, 4): Pearson of the ranks
    expected = np.corrcoef([1, 2.5, 2.5, 4], [1, 2, 3, 4])[0, 1]
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(expected)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))  # a constant has no ranking


def test_a_claim_takes_one_verdict_from_its_comparisons():
    from isaac_ppo.lab.report.compare import claims_table

    def c(claim, verdict):
        return {"claim": claim, "a": "x", "b": "y", "metric": "final", "verdict": verdict}

    comparisons = [c("1", "supported"), c("1", "supported"), c("2", "supported"), c("2", "contradicted"),
                   c("3", "contradicted"), c("3", "inconclusive at this budget"), c("4", "inconclusive at this budget"),
                   c("7", "not tested: 1 and 0 runs (needs 2 per arm)"), c("8", "not tested: 1 and 1 runs (needs 2 per arm)"),
                   c("8", "inconclusive at this budget")]
    claims = {1: "one", 2: "two", 3: "three", 4: "four", 5: {"text": "five", "not_tested": "no such arm"}, 6: "six",
              7: "seven", 8: "eight"}
    rows = {line.split(" | ")[0].strip("| "): line.rsplit(" | ", 1)[1].rstrip(" |")
            for line in claims_table(claims, comparisons).splitlines()[2:]}
    assert rows == {"1": "supported", "2": "mixed", "3": "contradicted", "4": "inconclusive at this budget",
                    "5": "not tested in this study: no such arm",
                    "6": "not tested in this study: no comparison listed", "7": "not tested yet: too few runs",
                    "8": "inconclusive at this budget"}


def test_the_claims_figure_puts_every_comparison_on_one_axis_positive_as_the_claim_says(tmp_path):
    from isaac_ppo.lab.report.compare import plot, toward_claim

    def c(expect, mean_a, mean_b, ci95, verdict):
        return {"claim": "1", "a": "x", "b": "y", "metric": "m", "expect": expect, "mean_a": mean_a,
                "mean_b": mean_b, "difference": mean_a - mean_b, "ci95": ci95, "verdict": verdict}

    # a return 10% above b, claimed greater: +10% (CI +5% to +15%)
    assert toward_claim(c("greater", 110.0, 100.0, [5.0, 15.0], "supported")) == pytest.approx((10.0, 5.0, 15.0))
    # a dormant fraction 20% below b, claimed less: +20% as the claim says (CI +10% to +30%)
    assert toward_claim(c("less", 0.4, 0.5, [-0.15, -0.05], "supported")) == pytest.approx((20.0, 10.0, 30.0))
    # a weight norm above b, claimed less: negative, against the claim
    middle, low, high = toward_claim(c("less", 12.0, 10.0, [1.0, 3.0], "contradicted"))
    assert middle == pytest.approx(-20.0) and low == pytest.approx(-30.0) and high == pytest.approx(-10.0)
    assert toward_claim(c("greater", 1.0, -2.0, [2.0, 4.0], "supported"))[0] == pytest.approx(150.0)  # |b| scales

    untested = {"claim": "2", "a": "x", "b": "y", "metric": "final", "expect": "greater", "verdict": "not tested"}
    assert plot([untested], str(tmp_path / "none.png")) is None and not (tmp_path / "none.png").exists()
    path = plot([c("greater", 110.0, 100.0, [5.0, 15.0], "supported"), untested], str(tmp_path / "compare.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_holm_adjusts_step_down_and_keeps_the_order():
    """Holm (1979): the k-th smallest of m p-values times (m - k + 1), kept monotone, capped at 1."""
    from isaac_ppo.lab.report.compare import holm

    rows = [{"p_permutation": p} for p in (0.04, 0.01, 0.03, 0.5)]
    holm(rows)
    assert [r["p_holm"] for r in rows] == pytest.approx([0.09, 0.04, 0.09, 0.5])


def test_a_comparison_names_the_gait_flagged_runs_it_holds_and_keeps_them(tmp_path):
    """A run past the gait flag stays in its comparison (PROTOCOL amendment 5: dropping it after seeing it would
    bias it); the comparison and the claims table say which verdict it touches."""
    import json

    from isaac_ppo.lab.report.compare import claims_table, compare, markdown

    runs = {}
    for arm, finals in {"fast": [8000.0, 8200.0, 14500.0], "slow": [6800.0, 6900.0, 7000.0]}.items():
        for seed, value in enumerate(finals):
            folder = tmp_path / arm / f"seed_{seed}"
            folder.mkdir(parents=True)
            (folder / "metrics.json").write_text(json.dumps({"final_eval": {"return_mean": value}}))
            (folder / "metrics.jsonl").write_text("")
            runs.setdefault(arm, []).append(str(folder))
    flagged = {runs["fast"][2]: "fast seed 2"}
    touched = compare(runs, {"claim": "s", "a": "fast", "b": "slow"}, flagged)
    untouched = compare({"slow": runs["slow"], "fast": runs["fast"][:2]}, {"claim": "s", "a": "fast", "b": "slow"},
                        flagged)
    assert touched["gait_flagged"] == ["fast seed 2"] and touched["runs"] == [3, 3]
    assert touched["mean_a"] == (8000.0 + 8200.0 + 14500.0) / 3  # (kept in the mean)
    assert untouched["gait_flagged"] == []
    claims = claims_table({"s": "fast beats slow"}, [touched, untouched]).splitlines()[2]
    assert claims.count("(with gait-flagged fast seed 2)") == 1
    assert "(with gait-flagged fast seed 2) |" in markdown([touched], [])
