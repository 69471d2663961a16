"""What needs more than pip: play's video needs an offscreen OpenGL (OSMesa on a CPU machine, EGL on a GPU node).
Without it, capture_video=true is refused before anything runs, in one line naming what to install."""
from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import pytest

from helpers import require_system

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


# (its own interpreter: MuJoCo reads MUJOCO_GL once, when it is first imported)
SOFTWARE_RENDER = """
import sys
import numpy as np
import mujoco
from isaac_ppo.envs import make
from isaac_ppo.io.video import VideoRecorder

env = make("Ant", 1, sim="mujoco")
env.reset()
recorder = VideoRecorder(env, sys.argv[1], max_frames=1, size=(128, 160))
plain = recorder.capture()
flags = recorder.renderer.scene.flags
print("off after a frame:", int(flags[mujoco.mjtRndFlag.mjRND_SHADOW]), int(flags[mujoco.mjtRndFlag.mjRND_REFLECTION]))
flags[mujoco.mjtRndFlag.mjRND_SHADOW] = flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 1
recorder.renderer.update_scene(recorder.data, camera="track")
shaded = recorder.renderer.render()
print("pixels that differ:", int(np.count_nonzero(np.any(plain != shaded, axis=-1))), "of", plain.shape[0] * plain.shape[1])
recorder.close()
"""


def test_software_rendering_skips_shadows_and_reflections(tmp_path):
    """OSMesa draws shadow maps and the floor's mirror image on the CPU (3.4x the time a frame on the terrain map):
    a recorder rendering in software switches both off, and they do show in a frame (so the switch is not a no-op)."""
    require_system(offscreen_gl_problem("osmesa"))
    # (cwd: not the checkout, whose isaac_ppo/ folder would shadow the installed package under `python -c`)
    result = subprocess.run([sys.executable, "-c", SOFTWARE_RENDER, str(tmp_path / "ant.mp4")], capture_output=True,
                            text=True, cwd=tmp_path, env=dict(os.environ, MUJOCO_GL="osmesa"), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "off after a frame: 0 0" in result.stdout, result.stdout
    differ = int(result.stdout.split("pixels that differ: ")[1].split()[0])
    assert differ > 100, result.stdout
