"""TensorBoard's event file, written here: a run's scalars (and, while training with capture_video, a summary that
io/video.py builds) as TensorBoard reads them, without importing TensorBoard.

Why not torch.utils.tensorboard's SummaryWriter: importing it (TensorBoard's summary package: its plugins, a
TensorFlow stub, absl) was ~0.25 s of every training process's start on 2 cores, where the suite launches some 300
of them, and what a run writes is a few dozen scalars an iteration. The format is TensorBoard's own:
tensorboard/summary/writer/record_writer.py (a record: its length as uint64, the length's masked CRC-32C, the bytes,
their masked CRC-32C) around tensorboard/compat/proto/event.proto's Event (wall_time 1, step 2, file_version 3,
summary 5, session_log 7), Summary.Value (tag 1, simple_value 2) and SessionLog (status 1, START = 1). A resumed run
writes what SummaryWriter(purge_step=...) writes first, so TensorBoard drops the events of the first attempt from
that step on. tests/unit/test_events.py reads the files back with TensorBoard's own EventAccumulator.
"""
from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from typing import Any, Optional

FILE_VERSION = b"brain.Event:2"
_START = 1  # SessionLog.START
_files = itertools.count()  # (two writers of one process in one second: two files)


def _crc32c_table() -> list:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # (Castagnoli's polynomial, reflected)
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # (a negative int64 as protobuf writes it: ten bytes)
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a message)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(step: int, **fields: bytes) -> bytes:
    """An Event's bytes: wall_time (now), step, then file_version, summary or session_log (already encoded)."""
    out = b"\x09" + struct.pack("<d", time.time()) + b"\x10" + _varint(int(step))
    numbers = {"file_version": 3, "summary": 5, "session_log": 7}
    return out + b"".join(_field(numbers[name], payload) for name, payload in fields.items())


class EventWriter:
    """The run's events.out.tfevents.* in log_dir; purge_step: the env step a resumed run starts from."""

    def __init__(self, log_dir: str, purge_step: Optional[int] = None):
        os.makedirs(log_dir, exist_ok=True)
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}."
                f"{next(_files)}")
        self.path = os.path.join(log_dir, name)
        self.file = open(self.path, "wb")
        self._record(_event(0, file_version=FILE_VERSION))
        if purge_step is not None:  # (what SummaryWriter(purge_step=...) writes: TensorBoard's restart marker)
            self._record(_event(purge_step, file_version=FILE_VERSION))
            self._record(_event(purge_step, session_log=b"\x08" + _varint(_START)))

    def _record(self, data: bytes) -> None:
        length = struct.pack("<Q", len(data))
        self.file.write(length + struct.pack("<I", _masked(crc32c(length))) + data
                        + struct.pack("<I", _masked(crc32c(data))))

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        value_bytes = _field(1, tag.encode()) + b"\x15" + struct.pack("<f", float(value))
        self._record(_event(step, summary=_field(1, value_bytes)))

    def add_summary(self, summary: Any, step: int) -> None:
        """A Summary message built elsewhere (anything with SerializeToString: TensorBoard's proto)."""
        self._record(_event(step, summary=summary.SerializeToString()))

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()
