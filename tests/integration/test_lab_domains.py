"""Every own argument of every lab command (isaac-ppo-study, -tune, -bench, -report, -export) has a declared domain
(isaac_ppo/lab/args.py), and a value outside it is refused as isaac-ppo-train refuses a config value: one line on
stderr naming the key, exit status 2, no traceback, nothing made on disk. A seeded fuzzer tries bad values on every
key through each command's real entry point (the function its console script calls), in process."""
from __future__ import annotations

import os
import random
import time
from typing import Any, Callable, Dict, List, Tuple

import pytest

from isaac_ppo import export
from isaac_ppo.errors import UserError
from isaac_ppo.lab import args, bench, study, tune
from isaac_ppo.lab import report

# (program, main, the words before the key, the key -> Arg it declares); the fuzzed word comes first among the
# keys, so it is the one refused, and nothing else is needed: the domains are checked before anything else
COMMANDS: List[Tuple[str, Callable[[List[str]], Any], List[str], Dict[str, args.Arg]]] = [
    ("isaac-ppo-study", study.main, ["run", "cartpole_toy"], study.OWN_KEYS["run"]),
    ("isaac-ppo-study", study.main, ["report", "cartpole_toy"], study.OWN_KEYS["report"]),
    ("isaac-ppo-study", study.main, ["placebo", "cartpole_toy"], study.OWN_KEYS["placebo"]),
    ("isaac-ppo-tune", tune.main, [], tune.OWN_KEYS),
    ("isaac-ppo-bench", bench.main, ["sim"], bench.own_keys("sim")),
    ("isaac-ppo-bench", bench.main, ["train"], bench.own_keys("train")),
    ("isaac-ppo-bench", bench.main, ["peers"], bench.own_keys("peers")),
    ("isaac-ppo-report", report.main, ["no_such_runs"], report.own_keys()),
    ("isaac-ppo-export", export.main, [], export.arguments()),
]

# what a user may type: wrong type, NaN, infinities, zero, negative, huge (as a number and as text), empty
TYPED = ["abc", "nan", "NaN", "inf", "-inf", "+inf", "0", "-1", "1e30", "10**12", str(10**12), str(2**64),
         str(-2**63 - 1), "1.5", "", " ", ",", "0,,1", "true", "a/b", "../up"]

# values inside each text-like domain (numbers and choices take theirs from the Domain)
INSIDE = {"arms": ["envs64_rollout8", "envs64_rollout8,envs32_rollout16"], "seeds": ["0", "0,1,2", "-1"],
          "runs_dir": ["runs", "a/b", "/tmp"], "out": ["out", "a/b/c.onnx"], "arm": ["envs64_rollout8"],
          "space": ["cartpole_toy", "cfg/tune/x.yaml"], "study": ["s", "sweep-1.a"],
          "storage": ["sqlite:///runs/study.db", "postgresql://u@h/db"], "task": ["Ant", "Cartpole"],
          "device": ["cpu", "cuda", "cuda:1"], "raw": ["true", "False"], "metric": ["eval.return_mean"],
          "checkpoint": [__file__]}


def _random_words(rng: random.Random, count: int) -> List[str]:
    """Printable text, unicode and undecodable bytes as the OS hands them on (never NUL: argv cannot carry it),
    and numbers of every size."""
    alphabet = [chr(c) for c in range(33, 127)] + ["é", "→", "\udcff", " "]
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(count)]
    words += [str(rng.randint(-10**rng.randint(1, 30), 10**rng.randint(1, 30))) for _ in range(count)]
    words += [repr(rng.uniform(-1e6, 1e6) * 10.0**rng.randint(-300, 300)) for _ in range(count)]
    return words


def _outside(arg: args.Arg, key: str, text: str) -> bool:
    try:
        arg.value(key, text)
    except UserError:
        return True
    return False


def _exit_status(main: Callable[[List[str]], Any], argv: List[str]) -> Any:
    try:
        return main(argv)
    except SystemExit as stopped:  # (isaac-ppo-report exits with SystemExit(2))
        return stopped.code


def test_every_bad_value_of_every_lab_key_is_one_line_and_exit_2(tmp_path, tmp_path_factory, monkeypatch, capsys):
    elsewhere = tmp_path_factory.mktemp("elsewhere")  # a file in the way of a folder, outside the watched cwd
    (elsewhere / "a_file").write_text("not a folder")
    disk_before = sorted(os.listdir(elsewhere))
    paths = [str(elsewhere / "a_file" / "sub"), "/proc/isaac-ppo-lab-fuzz", str(elsewhere), "no_such.pt"]
    monkeypatch.chdir(tmp_path)
    rng = random.Random(43)
    started, cases = time.perf_counter(), 0
    for prog, main, before, keys in COMMANDS:
        for key, arg in keys.items():
            candidates = TYPED + paths + _random_words(rng, 4)
            numeric = arg.domain is not None and arg.domain.kind in ("int", "real")
            if numeric:  # these are outside every number's domain: the declaration must say so
                for text in ("abc", "nan", "inf", "-inf", "", "10**12", "1e30" if arg.domain.kind == "int" else "nan"):
                    assert _outside(arg, key, text), (prog, key, text)
                low = arg.domain.low
                if low is not None:
                    candidates.append(repr(low - 1 if arg.domain.kind == "int" else low - 0.5))
            assert _outside(arg, key, ""), (prog, key)  # empty is outside every domain
            for text in candidates:
                if not _outside(arg, key, text):
                    continue  # inside: not run (it would start the command's work)
                argv = before + [f"{key}={text}"]
                status = _exit_status(main, argv)
                err = capsys.readouterr().err
                assert status == 2, (argv, status, err)
                assert err.count("\n") == 1 and err.endswith("\n"), (argv, err)
                assert err.startswith(f"{prog}: ") and f"{key}=" in err and "Traceback" not in err, (argv, err)
                assert not os.listdir(tmp_path), (argv, os.listdir(tmp_path))
                cases += 1
    assert sorted(os.listdir(elsewhere)) == disk_before
    with capsys.disabled():
        print(f"\n[lab fuzzer] {cases} cases, {sum(len(k) for *_, k in COMMANDS)} keys of {len(COMMANDS)} commands, "
              f"{time.perf_counter() - started:.1f} s")
    assert cases > 500


def test_values_inside_a_domain_are_not_refused_for_its_sake(tmp_path, monkeypatch):
    """Checked on the declarations (cheap): running them would start the commands' work."""
    monkeypatch.chdir(tmp_path)
    for prog, _, _, keys in COMMANDS:
        for key, arg in keys.items():
            domain = arg.domain
            if domain is not None and domain.kind == "choice":
                inside = [str(c) for c in domain.choices]
            elif domain is not None:
                low = 0 if domain.low is None else domain.low
                inside = [str(low), str(low + 7)] if domain.kind == "int" else ["0.5", "1e30", "3600"]
                inside += [str(int(domain.high))] if domain.high is not None else []
            else:
                inside = INSIDE[key]
            for text in inside:
                assert not _outside(arg, key, text), (prog, key, text)
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("main, argv, line", [
    (tune.main, ["trials=-3"], "isaac-ppo-tune: trials=-3 is outside its domain: an integer in [1, inf)"),
    (tune.main, ["trial_cap_s=nan"], "isaac-ppo-tune: trial_cap_s=nan is outside its domain: a number in (0, inf)"),
    (study.main, ["run", "toy", "seeds=0,x"],
     "isaac-ppo-study: seeds='0,x' is outside its domain: a comma-separated list of integers"),
    (bench.main, ["sim", "sim=bullet"],
     "isaac-ppo-bench: sim='bullet' is outside its domain: one of auto, mujoco, mjwarp, isaacgym"),
    (export.main, ["format=tflite"],
     "isaac-ppo-export: format='tflite' is outside its domain: one of onnx, torchscript"),
    (study.main, ["run", "toy", "runs_dir=/proc/x"],
     "isaac-ppo-study: runs_dir=/proc/x cannot be written (/proc is not writable for this user): point runs_dir= at "
     "a folder you can write"),
])
def test_the_line_names_the_key_the_value_and_the_domain(tmp_path, monkeypatch, capsys, main, argv, line):
    monkeypatch.chdir(tmp_path)
    assert _exit_status(main, argv) == 2
    assert capsys.readouterr().err == line + "\n"
    assert not os.listdir(tmp_path)


def test_the_runs_dir_tune_hands_on_is_checked_as_a_folder_it_writes(tmp_path, monkeypatch, capsys):
    """isaac-ppo-tune makes its study folder under the runs_dir= it hands on to the trials: an empty one (which
    would have put it in the current folder) is refused, before anything is made."""
    pytest.importorskip("optuna")
    monkeypatch.chdir(tmp_path)
    assert tune.main(["space=cartpole_toy", "trials=1", "study=s", "runs_dir="]) == 2
    assert capsys.readouterr().err == "isaac-ppo-tune: runs_dir='' is outside its domain: a folder path you can write\n"
    assert not os.listdir(tmp_path)
