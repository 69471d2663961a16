"""Where a study reads a finished run from (isaac_ppo.lab.study_definition.finished_folder)."""
from __future__ import annotations

from isaac_ppo.lab.study_definition import DONE, archived_folder, finished_folder, run_folder


def test_a_finished_run_is_read_from_the_archive_first_then_from_its_run_folder(tmp_path):
    """The archive is what git carries (amendment 9's posture was merged there, not into this machine's run
    folders): a committed report must read the same runs on every checkout."""
    root, study = str(tmp_path / "study"), {"archive": str(tmp_path / "archive")}
    local, kept = run_folder(root, "arm", 0), archived_folder(study, "arm", 0)
    assert finished_folder(root, study, "arm", 0) is None
    for folder in (local, kept):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / local / DONE).write_text("{}")
    assert finished_folder(root, study, "arm", 0) == local  # not archived (yet): the run folder
    (tmp_path / kept / DONE).write_text("{}")
    assert finished_folder(root, study, "arm", 0) == kept
