"""isaac_ppo.preload's wait policy: OMP_WAIT_POLICY=PASSIVE for the package's processes unless the user chose a wait
or torch is already loaded (libgomp reads it once, when torch loads: benchmarks/omp_wait_policy.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from isaac_ppo.preload import WAIT_VARIABLES

REPORT = ("import os, sys\n"
          "{before}\n"
          "from isaac_ppo import preload\n"
          "print(preload.idle_threads_sleep(), os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)\n")


def _without_a_wait() -> dict:
    """This environment without any variable that chooses libgomp's wait (the suite's conftest sets one)."""
    return {k: v for k, v in os.environ.items() if k not in WAIT_VARIABLES}


def _run(before: str = "", **env: str) -> list:
    done = subprocess.run([sys.executable, "-c", REPORT.format(before=before)], capture_output=True, text=True,
                          env=dict(_without_a_wait(), **env), check=True)
    return done.stdout.split()


def test_it_is_set_where_nothing_chose_a_wait_and_torch_is_not_loaded():
    assert _run() == ["True", "PASSIVE", "False"]  # (nor does preload itself load torch)


@pytest.mark.parametrize("env, expected", [({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE"),
                                           ({"GOMP_SPINCOUNT": "300000"}, "None")])
def test_a_wait_the_user_chose_is_kept(env, expected):
    assert _run(**env) == ["False", expected, "False"]


def test_nothing_is_set_once_torch_is_loaded():
    assert _run(before="import torch") == ["False", "None", "True"]


def test_the_cli_sets_it_before_torch_for_the_run_and_what_it_starts(tmp_path):
    """isaac-ppo-train sets it in its own process first (here with --cfg job, which prints the config and loads no
    torch), so the run and what it starts (torchrun's ranks, a sweep's parallel jobs) inherit it."""
    script = ("import os, sys\n"
              "from isaac_ppo import train\n"
              "try:\n"
              "    train.main(['task=Cartpole', '--cfg', 'job'])\n"
              "except SystemExit:\n"
              "    pass\n"
              "print('POLICY', os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_without_a_wait(),
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "POLICY PASSIVE False"
