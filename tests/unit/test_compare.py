"""The statistics of a study's comparisons (isaac_ppo.lab.report.compare), against answers known by hand."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from isaac_ppo.lab.report.compare import format_p, bootstrap_difference_ci, permutation_p, spearman, verdict


def _runs(tmp_path, finals_by_arm):
    """arm -> run folders whose metrics.json holds each given final evaluation return (and no rows)."""
    runs = {}
    for arm, finals in finals_by_arm.items():
        for seed, value in enumerate(finals):
            folder = tmp_path / arm / f"seed_{seed}"
            folder.mkdir(parents=True)
            (folder / "metrics.json").write_text(json.dumps({"final_eval": {"return_mean": value}}))
            (folder / "metrics.jsonl").write_text("")
            runs.setdefault(arm, []).append(str(folder))
    return runs


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
    from isaac_ppo.lab.report.compare import claims_table, compare, markdown

    runs = _runs(tmp_path, {"fast": [8000.0, 8200.0, 14500.0], "slow": [6800.0, 6900.0, 7000.0]})
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


def test_a_claim_of_no_loss_is_supported_only_by_a_ci_above_the_margin():
    """noninferior (a not worse than b by more than margin m): a CI that merely includes 0 supports nothing."""
    m = 10.0
    assert verdict(-5.0, 20.0, "greater", "noninferior", m) == "supported"  # the whole CI above -m
    assert verdict(-15.0, 20.0, "greater", "noninferior", m) == "inconclusive at this budget"  # straddles -m
    assert verdict(-40.0, -12.0, "greater", "noninferior", m) == "contradicted"  # all of it worse than -m
    # expect less (lower is better, e.g. a tracking error): worse is the positive side
    assert verdict(-20.0, 5.0, "less", "noninferior", m) == "supported"
    assert verdict(12.0, 40.0, "less", "noninferior", m) == "contradicted"
    # equivalent: within (-m, m) both ways; wholly past it on one side contradicts; else inconclusive
    assert verdict(-5.0, 5.0, "greater", "equivalent", m) == "supported"
    assert verdict(-5.0, 15.0, "greater", "equivalent", m) == "inconclusive at this budget"
    assert verdict(11.0, 30.0, "greater", "equivalent", m) == "contradicted"
    assert verdict(-30.0, -10.0, "greater", "equivalent", m) == "contradicted"


def test_an_interaction_compares_the_effect_of_the_env_count_between_two_networks(tmp_path):
    """(sep_hi - sep_lo) - (shared_hi - shared_lo): separate gains 1,000 from more envs, shared 0 -> +1,000, by
    hand; its CI from resampling each arm, a bootstrap p, and the margin's scale the four arms' mean |mean|."""
    from isaac_ppo.lab.report.compare import claims_table, compare, markdown

    runs = _runs(tmp_path, {"sep_hi": [6000.0, 6100.0, 5900.0, 6050.0, 5950.0],
                            "sep_lo": [5000.0, 5100.0, 4900.0, 5050.0, 4950.0],
                            "shared_hi": [5500.0, 5600.0, 5400.0, 5550.0, 5450.0],
                            "shared_lo": [5500.0, 5600.0, 5400.0, 5550.0, 5450.0]})
    c = compare(runs, {"claim": "5", "a": ["sep_hi", "sep_lo"], "b": ["shared_hi", "shared_lo"]})
    assert c["runs"] == [5, 5, 5, 5] and c["kind"] == "direction"
    assert c["difference"] == pytest.approx(1000.0) and c["mean_a"] == pytest.approx(1000.0)
    assert c["mean_b"] == pytest.approx(0.0) and c["scale"] == pytest.approx((6000 + 5000 + 5500 + 5500) / 4)
    low, high = c["ci95"]
    assert 850.0 < low < 1000.0 < high < 1150.0 and c["verdict"] == "supported" and c["p_bootstrap"] < 0.01
    # the same four arms read as "the effect is the same for both networks, within 10%": 1,000 is past 550
    same = compare(runs, {"claim": "6", "a": ["sep_hi", "sep_lo"], "b": ["shared_hi", "shared_lo"],
                          "kind": "equivalent", "margin": 0.1})
    assert same["verdict"] == "contradicted"
    text = markdown([c, same], [])
    assert "(sep_hi - sep_lo) vs (shared_hi - shared_lo)" in text and "(bootstrap)" in text
    assert "a = b within 10%" in text and "5 + 5 + 5 + 5" in text
    assert "on final (equivalent, margin 10%): contradicted" in claims_table({"6": "no re-tuning"}, [same])
    # too few runs in one arm: not tested, with each arm's count
    few = compare({**runs, "sep_lo": runs["sep_lo"][:1]}, {"claim": "5", "a": ["sep_hi", "sep_lo"],
                                                           "b": ["shared_hi", "shared_lo"]})
    assert few["verdict"] == "not tested: 5 and 1 and 5 and 5 runs (needs 2 per arm)"


def test_a_noninferiority_comparison_scales_its_margin_by_the_reference_arm(tmp_path):
    from isaac_ppo.lab.report.compare import compare

    # concurrent 2% below sync (5,880 against 6,000): within a 10% margin (600), the CI well above -600
    runs = _runs(tmp_path, {"concurrent": [5870.0, 5890.0, 5880.0, 5875.0, 5885.0],
                            "sync": [5990.0, 6010.0, 6000.0, 5995.0, 6005.0]})
    spec = {"claim": "hts", "a": "concurrent", "b": "sync", "kind": "noninferior", "margin": 0.1}
    c = compare(runs, spec)
    assert c["difference"] == pytest.approx(-120.0) and c["scale"] == pytest.approx(6000.0)
    assert c["verdict"] == "supported" and c["ci95"][1] < 0  # worse, significantly, but not past the margin
    assert compare(runs, dict(spec, kind="direction"))["verdict"] == "contradicted"  # the same data, read as a > b
    assert compare(runs, dict(spec, margin=0.01))["verdict"] == "contradicted"  # 1% margin (60): past it


@pytest.mark.parametrize("spec, fragment", [
    ({"a": ["x", "y"], "b": "z"}, "two pairs [HI, LO]"),
    ({"a": ["x", "y", "z"], "b": ["x", "y", "z"]}, "two pairs [HI, LO]"),
    ({"a": "x", "b": "nope"}, "two of the arms"),
    ({"a": "x", "b": "y", "kind": "similar", "margin": 0.1}, "compare[0].kind=similar: direction, noninferior, equivalent"),
    ({"a": "x", "b": "y", "kind": "noninferior"}, "compare[0].margin=None: kind=noninferior needs a margin"),
    ({"a": "x", "b": "y", "kind": "equivalent", "margin": 10}, "compare[0].margin=10"),
])
def test_a_comparison_the_report_cannot_make_is_refused_in_one_line(spec, fragment):
    from isaac_ppo.errors import UserError
    from isaac_ppo.lab.study_definition import _check_comparisons

    study = {"arms": {"x": [], "y": [], "z": []}, "compare": [spec]}
    with pytest.raises(UserError) as refused:
        _check_comparisons(study, "cfg/study/s.yaml")
    assert fragment in str(refused.value) and "\n" not in str(refused.value)


def test_each_claim_gets_a_panel_of_the_arms_it_compares_its_auc_line_folded_in(tmp_path):
    from isaac_ppo.lab.report.claim_curves import plot_claim_curves
    from isaac_ppo.lab.report.compare import claim_arms

    comparisons = [
        {"claim": "4", "a": "base", "b": "epochs8"}, {"claim": "4", "a": "epochs8_2n", "b": "epochs8"},
        {"claim": "4 (AUC)", "a": "base", "b": "epochs8"},
        {"claim": "5", "a": ["sep_hi", "sep_lo"], "b": ["shared_hi", "shared_lo"]},  # an interaction: four arms
        {"claim": "6 (AUC)", "a": "lr_hi", "b": "base"},  # an AUC line with no plain line keeps its own panel
    ]
    assert claim_arms(comparisons) == {"4": ["base", "epochs8", "epochs8_2n"],
                                       "5": ["sep_hi", "sep_lo", "shared_hi", "shared_lo"], "6": ["lr_hi", "base"]}

    def run(arm, seed, returns):
        folder = tmp_path / arm / f"seed_{seed}"
        folder.mkdir(parents=True)
        rows = [{"iteration": i, "env_steps": 100 * (i + 1), "eval": {"return_mean": r}}
                for i, r in enumerate(returns)]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        return str(folder)

    runs = {"base": [run("base", s, (1.0, 2.0)) for s in (0, 1)], "epochs8": [run("epochs8", 0, (1.0, 3.0))]}
    path = plot_claim_curves(runs, claim_arms(comparisons), str(tmp_path / "claim_curves.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # a study whose claims' arms have no evaluation yet draws nothing
    assert plot_claim_curves({}, claim_arms(comparisons), str(tmp_path / "none.png")) is None
    assert not (tmp_path / "none.png").exists()
