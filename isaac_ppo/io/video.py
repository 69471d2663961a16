"""Video of env 0 through MuJoCo's offscreen renderer, and whether this machine can render offscreen at all.

MuJoCo picks its OpenGL backend from MUJOCO_GL when it is imported: OSMesa (software, any CPU machine with
libOSMesa) or EGL (GPU nodes). isaac-ppo-train sets it for capture_video=true (osmesa, or egl with device=cuda)
unless the user did.
"""
from __future__ import annotations

import ctypes.util
import os
from typing import Any, List, Optional, Tuple

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


# what a VideoRecorder switches off when MuJoCo renders in software (MUJOCO_GL=osmesa): shadows and reflections
SOFTWARE_GL_OFF = ("mjRND_SHADOW", "mjRND_REFLECTION")


class VideoRecorder:
    """An mp4 of env 0 (up to max_frames frames) from the tracking camera; without shadows and reflections when
    rendered in software (OSMesa), with them on a GPU (EGL)."""

    def __init__(self, env: Any, path: str, max_frames: int = 1000, size: tuple = (480, 640)):
        if not hasattr(env, "sim"):
            raise UserError("capture_video=true renders the MuJoCo ports only: run it with sim=mujoco or sim=mjwarp")
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
        if os.environ.get("MUJOCO_GL") == "osmesa":
            # Software GL draws each shadow map and the floor's mirror image as full extra passes on the CPU: on
            # AnymalTerrain's 2,000 x 1,200-sample height field a frame took 2.9 s with them and 0.84 s without.
            for flag in SOFTWARE_GL_OFF:
                self.renderer.scene.flags[getattr(mujoco.mjtRndFlag, flag)] = 0
        self.writer = imageio.get_writer(path, fps=round(1.0 / env.dt))
        self.frames = 0

    def capture(self) -> Optional[Any]:
        """Render env 0 into the video; the frame (None past max_frames)."""
        if self.frames >= self.max_frames:
            return None
        self.data.qpos[:] = self.env.qpos[0].cpu().numpy()  # (either simulator's state row: one env, small)
        self.data.qvel[:] = self.env.qvel[0].cpu().numpy()
        self.env.show(self.data, 0)
        self.mujoco.mj_forward(self.env.model, self.data)
        self.renderer.update_scene(self.data, camera="track")
        frame = self.renderer.render()
        self.writer.append_data(frame)
        self.frames += 1
        return frame

    def close(self) -> None:
        self.writer.close()
        self.renderer.close()


class TrainingVideos:
    """capture_video=true while training: after every capture_video_interval_iterations-th iteration, env 0 of an env of its own
    (one env, its own seed stream: the training envs are not touched) plays the current policy's mean action from
    reset for capture_video_len steps (episodes restart as they end), filmed to <run_dir>/videos/iter_NNNNNN.mp4
    and handed back as frames for TensorBoard. Only the iterations that film pay for it (the logger films, after
    the iteration's timings are taken)."""

    def __init__(self, env: Any, run_dir: str, freq: int, length: int, policy_of: Any, size: tuple = (240, 320)):
        # policy_of(): a fresh policy of the current model (agent/acting.py's Acting: a recurrent one's state starts
        # at zeros and is zeroed at each episode's end)
        self.env, self.run_dir, self.freq, self.length, self.size = env, run_dir, freq, length, size
        self.policy_of = policy_of

    def due(self, iteration: int) -> bool:
        return self.freq > 0 and (iteration + 1) % self.freq == 0

    def record(self, iteration: int) -> Tuple[str, List[Any]]:
        """Film the policy after update `iteration`; (the mp4's path, its frames)."""
        import torch

        os.makedirs(os.path.join(self.run_dir, "videos"), exist_ok=True)
        path = os.path.join(self.run_dir, "videos", f"iter_{iteration + 1:06d}.mp4")
        recorder = VideoRecorder(self.env, path, max_frames=self.length, size=self.size)
        frames: List[Any] = []
        try:
            policy = self.policy_of()
            obs = self.env.reset()["obs"]
            with torch.no_grad():
                for _ in range(self.length):
                    obs_dict, _, resets, _ = self.env.step(policy(obs))
                    policy.episodes_ended(resets)
                    obs = obs_dict["obs"]
                    frames.append(recorder.capture())
        finally:
            recorder.close()
        return path, frames


def tensorboard_video(tag: str, frames: List[Any], fps: float) -> Any:
    """A TensorBoard summary of frames as it shows videos: an animated GIF in an image summary (what
    SummaryWriter.add_video writes, without its moviepy dependency). GIFs are large: every second frame at half
    the resolution (the mp4 beside the run keeps them all)."""
    import io

    import imageio
    from tensorboard.compat.proto.summary_pb2 import Summary

    frames = [frame[::2, ::2] for frame in frames[::2]]
    buffer = io.BytesIO()
    imageio.v2.mimwrite(buffer, frames, format="GIF", duration=2.0 / fps)
    height, width, channels = frames[0].shape
    image = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=buffer.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=image)])
