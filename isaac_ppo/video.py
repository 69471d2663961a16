"""Video of env 0 through MuJoCo's offscreen renderer, and whether this machine can render offscreen at all.

MuJoCo picks its OpenGL backend from MUJOCO_GL when it is imported: OSMesa (software, any CPU machine with
libOSMesa) or EGL (GPU nodes). isaac-ppo-train sets it for capture_video=true (osmesa, or egl with device=cuda)
unless the user did.
"""
from __future__ import annotations

import ctypes.util
import os
from typing import Any, Optional

from isaac_ppo.errors import UserError

# MUJOCO_GL -> (the library it loads, the Debian/Ubuntu package that has it)
GL_LIBRARIES = {"osmesa": ("OSMesa", "libosmesa6"), "egl": ("EGL", "libegl1"), "glfw": ("glfw", "libglfw3")}


def gl_backend(device: str) -> str:
    """The MUJOCO_GL a play run uses: the user's, else egl on a GPU node and osmesa elsewhere."""
    return os.environ.get("MUJOCO_GL") or ("egl" if device.startswith("cuda") else "osmesa")


def offscreen_gl_problem(backend: str) -> Optional[str]:
    """Why MuJoCo cannot render offscreen with MUJOCO_GL=backend on this machine (what to install), or None."""
    library, package = GL_LIBRARIES.get(backend, (None, None))
    if library is None:
        return f"MUJOCO_GL={backend} is not one of: {', '.join(GL_LIBRARIES)}"
    if ctypes.util.find_library(library) is None:
        return (f"capture_video=true renders with MUJOCO_GL={backend}, whose lib{library} is not installed here: "
                f"install it (apt-get install {package}) or drop capture_video=true")
    return None


class VideoRecorder:
    """An mp4 of env 0 (up to max_frames frames) from the tracking camera."""

    def __init__(self, env: Any, path: str, max_frames: int = 1000, size: tuple = (480, 640)):
        if not hasattr(env, "batch"):
            raise UserError("capture_video=true renders the MuJoCo ports only: run it with sim=mujoco")
        try:
            import imageio
        except ImportError:
            raise UserError("capture_video=true needs imageio and imageio-ffmpeg: pip install 'isaac-ppo[video]'") from None
        import mujoco

        self.env, self.path, self.max_frames = env, path, max_frames
        self.mujoco = mujoco
        self.data = mujoco.MjData(env.model)
        try:
            self.renderer = mujoco.Renderer(env.model, *size)
        except Exception as error:
            raise UserError(
                f"MuJoCo's offscreen renderer failed ({error}): on a CPU machine install libosmesa6 and set "
                "MUJOCO_GL=osmesa; on a GPU node MUJOCO_GL=egl"
            ) from None
        self.writer = imageio.get_writer(path, fps=round(1.0 / env.dt))
        self.frames = 0

    def capture(self) -> None:
        if self.frames >= self.max_frames:
            return
        self.env.batch.get_data(0, self.data)
        self.mujoco.mj_forward(self.env.model, self.data)
        self.renderer.update_scene(self.data, camera="track")
        self.writer.append_data(self.renderer.render())
        self.frames += 1

    def close(self) -> None:
        self.writer.close()
        self.renderer.close()
