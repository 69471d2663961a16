"""The lab commands read their arguments one way (isaac_ppo/lab/args.py): KEY=VALUE words sorted into the
command's own keys, overrides handed on to isaac-ppo-train, and positional words; anything else is one line."""
from __future__ import annotations

import pytest

from isaac_ppo.domains import integer
from isaac_ppo.errors import UserError
from isaac_ppo.lab import args, bench, study, tune
from isaac_ppo.lab.bench_sim import SIM_DEFAULTS
from isaac_ppo.lab.report import main as report_main
from isaac_ppo.lab.report import parse_args as report_args


def test_words_are_sorted_into_own_keys_handed_on_overrides_and_positional_words():
    words = args.parse(["trials=3", "task=Ant", "+agent.x=1", "--study", "s", "--space=a", "trials=4"],
                       {"space": args.text(), "trials": args.number(integer(1)), "study": args.name()}, "usage",
                       hands_on=True)
    assert words.own == {"trials": 4, "study": "s", "space": "a"}  # the last one given wins, read as its domain's
    assert words.train == ["task=Ant", "+agent.x=1"]
    folders = args.parse(["runs/a", "out=o", "runs/b"], {"out": args.folder(writes=False)}, "usage", positional=True)
    assert folders.positional == ["runs/a", "runs/b"] and folders.own == {"out": "o"}


@pytest.mark.parametrize("argv, message", [
    (["colour=red"], "unknown argument 'colour=red': this command takes out=, reps="),
    (["--colour", "red"], "unknown flag '--colour'"),
    (["runs/a"], "'runs/a' is not KEY=VALUE"),
    (["--out"], "--out needs a value: out=VALUE"),
])
def test_anything_else_is_one_line_naming_the_word(argv, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace("[", r"\[")) as caught:
        args.parse(argv, {"out": args.folder(writes=False), "reps": args.number(integer(1))}, "usage")
    assert "\n" not in str(caught.value)


def test_every_lab_command_reads_its_words_the_same_way():
    assert study.parse_args(["run", "toy", "seeds=0,1", "task=Cartpole"]) == {
        "command": "run", "study": "toy", "runs_dir": "runs", "seeds": [0, 1], "train": ["task=Cartpole"]}
    with pytest.raises(UserError, match="unknown argument 'task=Cartpole'"):  # report starts no runs
        study.parse_args(["report", "toy", "task=Cartpole"])
    own, train = tune.parse_args(["space=s", "trials=2", "study=t", "task=Ant"])
    assert own == {"space": "s", "trials": 2, "study": "t"} and train == ["task=Ant"]
    assert bench.parse_overrides(["num_envs=8", "raw=false"]) == dict(SIM_DEFAULTS, num_envs=8, raw=False)
    flags, words = report_args(["d", "--metric", "m", "--reps", "9"]), report_args(["d", "metric=m", "reps=9"])
    assert vars(flags) == vars(words) == {"dirs": ["d"], "metric": "m", "out": None, "reps": 9, "seed": 0}


def test_the_report_refuses_a_bad_number_in_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as stopped:
        report_main([str(tmp_path), "reps=many"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == ("isaac-ppo-report: reps='many' is outside its domain: an integer in [1, inf)"
                                       "\n")
