"""Weights & Biases logging (wandb_activate=true, IsaacGymEnvs' wandb_* keys): one W&B run per run, fed the
scalars TensorBoard gets, under the same tags, at the same step (env steps); videos; the run's config.

wandb is optional (pip install 'isaac-ppo[wandb]') and imported only when a run asks for it; only rank 0 logs
(the RunLogger lives there). The W&B run's id is kept in the run folder (wandb_run_id), so that a run resumed in
place (a requeued job) or into a new folder (resume=PATH|auto: its config.yaml names the checkpoint, whose run
folder holds the id) continues the same W&B run. The jobs of a multirun (hydra -m) share a W&B group, the sweep
folder's name, unless wandb_group is set. WANDB_MODE=offline writes <run>/wandb/ for a later `wandb sync`.
"""
from __future__ import annotations

import os
import uuid
from typing import Any, Dict, List, Mapping, Optional

from isaac_ppo.errors import UserError

ID_FILE = "wandb_run_id"
MISSING = "wandb_activate=true needs wandb: pip install 'isaac-ppo[wandb]'"
CODE_SUFFIXES = (".py", ".yaml", ".xml")  # wandb_logcode=true: the package, its config tree and task assets
_active: List["WandbSink"] = []  # this process's open W&B run, if any (log_video writes to it)


def require_wandb() -> None:
    """Refuse wandb_activate=true when wandb cannot be imported (config/checks.py: before a run folder exists)."""
    try:
        import wandb  # noqa: F401
    except ImportError as error:
        missing = (getattr(error, "name", None) or "").split(".")[0]
        raise UserError(MISSING if missing in ("wandb", "") else f"{MISSING} ({error})") from None


def for_run(cfg: Any, run_dir: str, job_type: str = "train") -> Optional["WandbSink"]:
    """The W&B sink of the run in run_dir (started by RunLogger.begin), or None without wandb_activate."""
    if not cfg.wandb_activate:
        return None
    return WandbSink(cfg, run_dir, cfg.wandb_group or sweep_group(), job_type)


def sweep_group() -> str:
    """In a multirun job (hydra -m): the sweep folder's name (hydra.sweep.dir), one group per sweep; else ''."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return ""
    hydra = HydraConfig.get()
    if hydra.mode != RunMode.MULTIRUN:
        return ""
    return os.path.basename(os.path.normpath(str(hydra.sweep.dir)))


def log_video(path: str, step: Optional[int] = None, key: str = "video") -> bool:
    """Upload the video file at path (an mp4) to this process's W&B run, at env step `step` (None: W&B's
    current step); False when no W&B run is open (wandb_activate=false, or not rank 0)."""
    if not _active:
        return False
    _active[-1].log_video(path, step, key)
    return True


def log_play(cfg: Any, run_dir: str, result: Mapping[str, Any]) -> None:
    """Play mode (test=true) with wandb_activate=true: a W&B run of its own (job_type play) with what was played
    (play/return_mean, ...) and its video (capture_video=true)."""
    sink = for_run(cfg, run_dir, job_type="play")
    if sink is None:
        return
    sink.start()
    try:
        sink.run.summary.update({f"play/{k}": v for k, v in result.items() if _number(v)})
        if result.get("video"):
            sink.log_video(result["video"], None, "play/video")
    finally:
        sink.finish()


class WandbSink:
    """One W&B run: started at the run's first logged iteration, fed one row per iteration, finished at close."""

    def __init__(self, cfg: Any, run_dir: str, group: str = "", job_type: str = "train"):
        self.cfg, self.run_dir, self.group, self.job_type = cfg, run_dir, group, job_type
        self.run: Any = None
        self.pending: Dict[str, float] = {}  # the row being written: tag -> value
        self.step = 0

    def begin(self, writer: Any) -> "_Tee":
        """Start the W&B run; returns `writer` (the run's io/events.EventWriter) with its scalars copied here."""
        self.start()
        return _Tee(writer, self)

    def start(self) -> None:
        import wandb
        from omegaconf import OmegaConf

        cfg = self.cfg
        run_id = self._run_id()
        name = cfg.wandb_name or f"{cfg.experiment or cfg.task.name}/{os.path.basename(os.path.normpath(self.run_dir))}"
        try:
            self.run = wandb.init(
                project=cfg.wandb_project, entity=cfg.wandb_entity or None, group=self.group or None, name=name,
                tags=list(cfg.wandb_tags) or None, dir=self.run_dir, id=run_id, resume="allow", job_type=self.job_type,
            )
            # (after init, allowed to change: a resumed run may raise its budgets)
            self.run.config.update(OmegaConf.to_container(cfg, resolve=True), allow_val_change=True)
        except Exception as error:  # (wandb's own: no login, no network, a bad project or entity)
            lines = str(error).strip().splitlines() or [type(error).__name__]
            raise UserError(f"wandb_activate=true: W&B did not start the run ({lines[0]}): log in (wandb login, or "
                            "WANDB_API_KEY), or log offline with WANDB_MODE=offline") from None
        if self.job_type == "train":
            with open(os.path.join(self.run_dir, ID_FILE + ".part"), "w") as f:
                f.write(run_id + "\n")
            os.replace(os.path.join(self.run_dir, ID_FILE + ".part"), os.path.join(self.run_dir, ID_FILE))
        self._log_code()
        _active.append(self)

    def _run_id(self) -> str:
        """This folder's W&B run (resumed in place), else that of the run whose checkpoint this one resumed
        (config.yaml's `resume`, or cfg.resume=PATH), else a new one."""
        folders = [self.run_dir] if self.job_type == "train" else []
        resumed = _resumed_checkpoint(self.run_dir) or self.cfg.resume
        if self.job_type == "train" and resumed and resumed != "auto":
            folders.append(os.path.dirname(os.path.dirname(os.path.abspath(resumed))))  # <run>/checkpoints/x.pt
        for folder in folders:
            path = os.path.join(folder, ID_FILE)
            if os.path.isfile(path):
                with open(path) as f:
                    return f.read().strip()
        return uuid.uuid4().hex[:16]

    def _log_code(self) -> None:
        """IsaacGymEnvs' wandb_logcode_dir=PATH (the code under PATH), and wandb_logcode=true (this package's)."""
        if self.cfg.wandb_logcode_dir:
            self.run.log_code(root=self.cfg.wandb_logcode_dir)
        if self.cfg.wandb_logcode:
            import importlib

            folders = [os.path.dirname(os.path.abspath(importlib.import_module(name).__file__))
                       for name in ("isaac_ppo", "isaac_ppo.cfg", "isaac_ppo.tasks")]
            self.run.log_code(root=os.path.commonpath(folders), name="isaac-ppo-source", include_fn=lambda path: path.endswith(
                CODE_SUFFIXES) and any(os.path.abspath(path).startswith(folder + os.sep) for folder in folders))

    def add_scalar(self, tag: str, value: Any, step: int) -> None:
        self.pending[tag] = float(value)
        self.step = int(step)

    def flush(self, video: Optional[str] = None) -> None:
        """The row's scalars (and the video file it made, if any) as one W&B step. A row whose step W&B has
        already passed (a run resumed from a checkpoint older than its last logged row) is left out: W&B keeps the
        values it has for that step."""
        if self.pending and self.step > (self.run.step or 0):
            if video:
                self.pending["video/env0"] = self._video(video)  # (TensorBoard's tag for it)
            self.run.log(self.pending, step=self.step)
        self.pending = {}

    def summarize(self, summary: Mapping[str, Any]) -> None:
        """metrics.json's end-of-run numbers (final_eval/return_mean, mean_fps, ...) in the W&B run's summary."""
        flat = {}
        for key, value in summary.items():
            if isinstance(value, Mapping):
                flat.update({f"{key}/{k}": v for k, v in value.items() if _number(v)})
            elif _number(value):
                flat[key] = value
        self.run.summary.update(flat)

    def log_video(self, path: str, step: Optional[int], key: str = "video") -> None:
        if step is None:
            self.run.log({key: self._video(path)})
        else:
            self.run.log({key: self._video(path)}, step=max(int(step), self.run.step or 0))

    @staticmethod
    def _video(path: str) -> Any:
        import wandb

        return wandb.Video(path, format=os.path.splitext(path)[1].lstrip(".") or "mp4")

    def finish(self) -> None:
        if self.run is not None:
            self.flush()
            self.run.finish()
            if self in _active:
                _active.remove(self)
            self.run = None


class _Tee:
    """The run's TensorBoard writer whose scalars are also this row's W&B values (RunLogger writes through it)."""

    def __init__(self, writer: Any, sink: WandbSink):
        self.writer, self.sink = writer, sink

    def add_scalar(self, tag: str, value: Any, step: int, *args: Any, **kwargs: Any) -> None:
        self.writer.add_scalar(tag, value, step, *args, **kwargs)
        self.sink.add_scalar(tag, value, step)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.writer, name)


def _resumed_checkpoint(run_dir: str) -> str:
    """The checkpoint the run in run_dir continues (its config.yaml's `resume`), or ''."""
    path = os.path.join(run_dir, "config.yaml")
    if not os.path.isfile(path):
        return ""
    from omegaconf import OmegaConf

    resume = OmegaConf.load(path).get("resume") or ""
    return resume if resume != "auto" and os.path.isfile(resume) else ""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
