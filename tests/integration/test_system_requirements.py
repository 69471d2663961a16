"""What needs more than pip: play's video needs an offscreen OpenGL (OSMesa on a CPU machine, EGL on a GPU node).
Without it, capture_video=true is refused before anything runs, in one line naming what to install."""
from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import pytest

from isaac_ppo.errors import UserError
from isaac_ppo.config.compose import compose_config
from isaac_ppo.io.video import gl_backend, offscreen_gl_problem

PLAY = ["task=Cartpole", "sim=mujoco", "test=true", "checkpoint=some.pt", "capture_video=true"]


def test_without_libosmesa_capture_video_names_the_package(monkeypatch):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    with pytest.raises(UserError, match=r"MUJOCO_GL=osmesa, whose libOSMesa is not installed here: install it "
                                        r"\(apt-get install libosmesa6\) or drop capture_video=true"):
        compose_config(PLAY)
    compose_config([word for word in PLAY if word != "capture_video=true"])  # play without video: fine


def test_gpu_nodes_render_with_egl(monkeypatch):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    assert gl_backend("cuda:0") == "egl" and gl_backend("cpu") == "osmesa"
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert "apt-get install libegl1" in offscreen_gl_problem("egl")


def test_an_unusable_gl_backend_is_one_line_and_exit_2(tmp_path):
    script = os.path.join(os.path.dirname(sys.executable), "isaac-ppo-train")
    result = subprocess.run([script, *PLAY, f"runs_dir={tmp_path / 'runs'}"], capture_output=True, text=True,
                            cwd=tmp_path, env=dict(os.environ, MUJOCO_GL="nonsense"), timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "isaac-ppo-train: MUJOCO_GL=nonsense is not one of: osmesa, egl, glfw"]
    assert not (tmp_path / "runs").exists()
