"""A study's archive packed in one file: NAME.tar.xz, the runs' small files, read as it is and appended to atomically.

A pack holds what the folder archive NAME/ held, one member per file, named <arm>/seed_<s>/<file> (no leading
folder): `mkdir NAME && tar -xJf NAME.tar.xz -C NAME` gives the folder back, and
`python -m isaac_ppo.lab.archive pack NAME` packs a folder archive into NAME.tar.xz (train.log, checkpoints and
the like left out, as the study leaves them out). xz compresses the runs' JSONL rows about six-fold, so a study of
forty runs is carried in git as one file of ~1.5 MB instead of ~300 files of ~10 MB.

Written deterministically (members in name order, mtime 0, no owner): the same runs give the same bytes. Written
atomically: a new pack is written beside the old one under a temporary name and renamed over it, so a pack is
never half-written (a failure leaves the previous pack as it was). Added to under a lock: `add` reads, extends and
rewrites the pack holding an exclusive lock on its folder, so two study processes on one machine (one a core, with
seeds= or arms= apart) that finish runs at the same moment both land, instead of the later write dropping the run
the earlier one added.

Read as a folder: `unpacked(pack)` extracts it once per process into a temporary folder (removed at exit; extracted
again when the pack changes), and `shown(path)` names a path in that folder as the pack's folder NAME/<arm>/...
would be named, so a report lists the same run folders from a pack as from the folder it replaced.
"""
from __future__ import annotations

import atexit
import contextlib
import io
import lzma
import os
import shutil
import sys
import tarfile
import tempfile
from typing import Callable, Dict, Iterator, List, Optional, Tuple

try:
    import fcntl  # POSIX; elsewhere (Windows) `add` goes unlocked: one study process at a time there
except ImportError:  # pragma: no cover
    fcntl = None

SUFFIX = ".tar.xz"
# what an archived run leaves out: checkpoints, TensorBoard files, videos (large, and nothing a report reads), an
# agent=rl_games run's own checkpoints (nn/, *.pth: 0.6 MB each for FrankaCubeStack, one every 16 epochs) and
# TensorBoard events (summaries/), and train.log (Hydra's job log: the study's own log of the run is
# logs/<arm>_seed_<s>.log, and no report reads either)
NOT_ARCHIVED = shutil.ignore_patterns("checkpoints", "tb", "videos", "nn", "summaries", "*.pt", "*.pth", "*.mp4",
                                      "*.tmp", "train.log")

_unpacked: Dict[str, Tuple[Optional[Tuple[int, int, int]], str]] = {}  # pack -> (its stamp, the folder it is in)
_shown: Dict[str, str] = {}  # an unpacked folder -> the pack's folder name (the pack's path less .tar.xz)


def is_pack(path: str) -> bool:
    return str(path).endswith(SUFFIX)


def folder_name(pack: str) -> str:
    """The folder the pack stands for: its path less .tar.xz."""
    return os.path.abspath(pack)[:-len(SUFFIX)]


def read(pack: str) -> Dict[str, bytes]:
    """Every member of the pack: name -> content (an absent pack: none)."""
    if not os.path.isfile(pack):
        return {}
    files: Dict[str, bytes] = {}
    with tarfile.open(pack, "r:xz") as tar:
        for member in tar:
            if not member.isfile():
                continue
            name = _checked(member.name, pack)
            extracted = tar.extractfile(member)
            files[name] = extracted.read() if extracted else b""
    return files


def write(pack: str, files: Dict[str, bytes]) -> None:
    """The pack holding `files` (member name -> content), replacing any older pack whole: written under a
    temporary name in the same folder, flushed to disk, then renamed over it (os.replace: atomic), so that a
    reader, or a process killed mid-write, sees the old pack or the new one, never a part."""
    pack = os.path.abspath(pack)
    os.makedirs(os.path.dirname(pack), exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(pack), prefix=os.path.basename(pack) + ".",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as raw:
            # (xz -9e: a pack is carried by git for good; 3% smaller than the default preset, ~8 s a 9 MB pack)
            with tarfile.open(fileobj=raw, mode="w:xz", format=tarfile.PAX_FORMAT,
                              preset=9 | lzma.PRESET_EXTREME) as tar:
                for name in sorted(files):
                    data = files[name]
                    info = tarfile.TarInfo(_checked(name, pack))
                    info.size, info.mtime, info.mode = len(data), 0, 0o644
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    tar.addfile(info, io.BytesIO(data))
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(temporary, 0o644)  # (mkstemp's 0600 would keep the pack from other users)
        os.replace(temporary, pack)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def folder_files(folder: str, ignore: Callable[[str, List[str]], set] = NOT_ARCHIVED) -> Dict[str, bytes]:
    """A folder's files, name relative to it ('/'-separated) -> content, without what `ignore` leaves out (as
    shutil.copytree's ignore= does)."""
    files: Dict[str, bytes] = {}
    for where, subfolders, names in os.walk(folder):
        left_out = ignore(where, subfolders + names)
        subfolders[:] = sorted(s for s in subfolders if s not in left_out)
        for name in sorted(n for n in names if n not in left_out):
            path = os.path.join(where, name)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    files[os.path.relpath(path, folder).replace(os.sep, "/")] = f.read()
    return files


def add(pack: str, prefix: str, folder: str) -> None:
    """Put `folder`'s files (less NOT_ARCHIVED) into the pack under prefix/ (e.g. arm/seed_0), replacing what the
    pack held there; the rest of the pack is kept. One atomic write (see write)."""
    prefix = prefix.strip("/")
    added = {f"{prefix}/{name}": data for name, data in folder_files(folder).items()}
    with locked(pack):  # the read and the write as one step against another process's add
        files = {name: data for name, data in read(pack).items() if not name.startswith(prefix + "/")}
        files.update(added)
        write(pack, files)


@contextlib.contextmanager
def locked(pack: str) -> Iterator[None]:
    """An exclusive lock on the folder that holds the pack (flock on the folder itself: no lock file is left
    beside a pack carried in git), held for the block; another process's `add` to a pack there waits for it."""
    folder = os.path.dirname(os.path.abspath(pack))
    os.makedirs(folder, exist_ok=True)
    if fcntl is None:  # pragma: no cover
        yield
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # (closing the last descriptor releases the lock)


def unpacked(pack: str) -> str:
    """The pack's runs as a folder: extracted into a temporary folder once per process (again if the pack has
    changed since), removed at exit. An absent pack gives an empty folder."""
    path = os.path.abspath(pack)
    stamp = _stamp(path)
    cached = _unpacked.get(path)
    if cached and cached[0] == stamp:
        return cached[1]
    folder = os.path.realpath(tempfile.mkdtemp(prefix="isaac-ppo-archive-"))
    for name, data in read(path).items():
        target = os.path.join(folder, *name.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)
    _unpacked[path] = (stamp, folder)
    _shown[folder] = folder_name(path)
    return folder


def shown(path: str) -> str:
    """A path inside an unpacked pack as the pack's folder would name it (NAME/<arm>/seed_<s>); other paths as
    they are."""
    real = os.path.realpath(path)
    for folder, name in _shown.items():
        if real == folder or real.startswith(folder + os.sep):
            return name + real[len(folder):]
    return path


def _stamp(path: str) -> Optional[Tuple[int, int, int]]:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns, status.st_size


def _checked(name: str, pack: str) -> str:
    """A member name that stays inside the folder it is extracted to."""
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{pack}: member {name!r} is not a plain relative path")
    return name


def _remove_unpacked() -> None:
    for folder in list(_shown):
        shutil.rmtree(folder, ignore_errors=True)


atexit.register(_remove_unpacked)


def main(argv: Optional[List[str]] = None) -> int:
    """python -m isaac_ppo.lab.archive pack FOLDER [PACK]: a folder archive packed (PACK: FOLDER.tar.xz)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3) or argv[0] != "pack" or not os.path.isdir(argv[1]):
        print("usage: python -m isaac_ppo.lab.archive pack FOLDER [PACK]   (PACK: FOLDER.tar.xz; FOLDER is kept)",
              file=sys.stderr)
        return 2
    folder = argv[1].rstrip("/" + os.sep)
    pack = argv[2] if len(argv) == 3 else folder + SUFFIX
    files = folder_files(folder)
    write(pack, files)
    print(f"{pack}: {len(files)} files of {folder} ({sum(map(len, files.values())):,} bytes), "
          f"{os.path.getsize(pack):,} bytes packed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
