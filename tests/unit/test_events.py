"""io/events.py's TensorBoard event files, read back by TensorBoard's own reader: scalars at their steps, a summary
built elsewhere, and a resumed run's restart marker, after which TensorBoard drops the first attempt's events from
the resumed step on (what SummaryWriter(purge_step=...) did for it)."""
from __future__ import annotations

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from isaac_ppo.io.events import EventWriter, crc32c


def read(log_dir):
    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    return events


def test_crc32c_is_castagnolis():
    assert crc32c(b"123456789") == 0xE3069283 and crc32c(b"") == 0  # (the check value of CRC-32C)


def test_scalars_land_at_their_steps_with_their_tags_and_values():
    import tempfile

    with tempfile.TemporaryDirectory() as log_dir:
        writer = EventWriter(log_dir)
        for step in (0, 128, 256):
            writer.add_scalar("train/return", step / 64.0 - 1.5, step)
            writer.add_scalar("eval/successes", 0.25, step)
        writer.add_scalar("big", 2 ** 40, 2 ** 40)  # (a step past 32 bits: env steps of a long run)
        writer.flush()
        events = read(log_dir)
        assert [(e.step, e.value) for e in events.Scalars("train/return")] == [(0, -1.5), (128, 0.5), (256, 2.5)]
        assert [e.value for e in events.Scalars("eval/successes")] == [0.25] * 3
        assert [(e.step, e.value) for e in events.Scalars("big")] == [(2 ** 40, pytest.approx(2 ** 40))]
        writer.close()


def test_a_summary_built_elsewhere_is_read_as_what_it_is():
    import tempfile

    from tensorboard.compat.proto.summary_pb2 import Summary

    with tempfile.TemporaryDirectory() as log_dir:
        writer = EventWriter(log_dir)
        image = Summary.Image(height=1, width=1, colorspace=3, encoded_image_string=b"GIF89a")
        writer.add_summary(Summary(value=[Summary.Value(tag="video/env0", image=image)]), 64)
        writer.close()
        (shown,) = read(log_dir).Images("video/env0")
        assert shown.step == 64 and shown.encoded_image_string == b"GIF89a"


def test_a_resumed_run_replaces_the_first_attempts_events_from_its_step_on(tmp_path):
    first = EventWriter(str(tmp_path))
    for step in range(5):
        first.add_scalar("r", step, step * 10)
    first.close()  # (killed after step 40; its checkpoint was at 20)
    resumed = EventWriter(str(tmp_path), purge_step=20)
    for step in (2, 3):
        resumed.add_scalar("r", 100 + step, step * 10)
    resumed.close()
    assert [(e.step, e.value) for e in read(tmp_path).Scalars("r")] == [(0, 0), (10, 1), (20, 102), (30, 103)]
    # the marker, as TensorBoard's protos read it: the file's version, then a START at the resumed step
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    events = list(EventFileLoader(resumed.path).Load())
    assert [e.file_version for e in events[:2]] == ["brain.Event:2"] * 2 and events[1].step == 20
    assert events[2].session_log.status == SessionLog.START and events[2].step == 20
    assert isinstance(events[3], Event) and list(events[3].summary.value[0].tensor.float_val) == [102.0]
