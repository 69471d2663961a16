"""Interval keys say what they count (eval.interval_env_steps, save_interval_iterations,
diagnostics.interval_iterations, capture_video_interval_iterations); the old names still work with a one-line
note naming the new key, and a run written under the old names is still the same run to resume."""
from __future__ import annotations

import subprocess
import sys

from omegaconf import OmegaConf

from isaac_ppo.config.compose import RENAMED, compose_config
from isaac_ppo.loop.resume import resume_mismatch

OLD = ["eval.interval=4096", "save_interval=7", "diagnostics.interval=3", "capture_video_freq=5"]


def test_old_names_set_the_new_keys_with_a_note_each(capsys):
    cfg = compose_config(["task=Cartpole", *OLD])
    assert (cfg.eval.interval_env_steps, cfg.save_interval_iterations, cfg.diagnostics.interval_iterations,
            cfg.capture_video_interval_iterations) == (4096, 7, 3, 5)
    notes = capsys.readouterr().err.splitlines()
    assert notes == [f"note: {old} is now {new} (the old name still works)" for old, new in RENAMED.items()]


def test_a_run_written_under_the_old_names_is_the_same_run(tmp_path):
    cfg = compose_config(["task=Cartpole", "eval.interval_env_steps=4096", "save_interval_iterations=7"])
    tree = OmegaConf.to_container(cfg, resolve=True)
    tree["eval"]["interval"] = tree["eval"].pop("interval_env_steps")  # as a config.yaml of before the rename
    tree["diagnostics"]["interval"] = tree["diagnostics"].pop("interval_iterations")
    tree["save_interval"] = tree.pop("save_interval_iterations")
    saved = tmp_path / "config.yaml"
    OmegaConf.save(OmegaConf.create(tree), saved)
    assert resume_mismatch(str(saved), cfg) is None
    other = compose_config(["task=Cartpole", "diagnostics.interval_iterations=9"])
    assert resume_mismatch(str(saved), other) == "diagnostics.interval_iterations=10 there, 9 here"


def test_the_command_line_takes_the_old_names(tmp_path):
    done = subprocess.run([sys.executable, "-m", "isaac_ppo.train", "task=Cartpole", "eval.interval=4096",
                           "--cfg", "job"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "interval_env_steps: 4096" in done.stdout
    assert "isaac-ppo-train: note: eval.interval is now eval.interval_env_steps" in done.stderr
