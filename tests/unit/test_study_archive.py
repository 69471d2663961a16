"""A study's packed archive (isaac_ppo.lab.archive): a run archived into NAME.tar.xz is found done and read by the
report on a machine that has only the pack; the pack is written deterministically and atomically."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time

import pytest

from isaac_ppo.lab import archive
from isaac_ppo.lab.study import DONE, archive_run, finished_folder, report_study, run_folder


def finished_run(folder, seed, returns=(10.0, 20.0)):
    """A run folder as isaac-ppo-study leaves a finished run: rows with evaluations, its summary, config, record,
    and the large files the archive leaves behind."""
    os.makedirs(os.path.join(folder, "checkpoints"))
    os.makedirs(os.path.join(folder, "tb"))
    os.makedirs(os.path.join(folder, ".hydra"))
    rows = [{"iteration": i, "env_steps": 100 * (i + 1), "wall_s": 1.0 * (i + 1), "collect_s": 0.5, "update_s": 0.4,
             "eval": {"return_mean": r, "seconds": 0.1}} for i, r in enumerate(returns)]
    with open(os.path.join(folder, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    with open(os.path.join(folder, "metrics.json"), "w") as f:
        json.dump({"iterations": len(rows), "env_steps": rows[-1]["env_steps"]}, f)
    with open(os.path.join(folder, "config.yaml"), "w") as f:
        f.write(f"seed: {seed}\ntask:\n  name: Cartpole\n")
    with open(os.path.join(folder, ".hydra", "overrides.yaml"), "w") as f:
        f.write(f"- seed={seed}\n")
    with open(os.path.join(folder, DONE), "w") as f:
        json.dump({"arm": "arm", "seed": seed, "overrides": [], "ended_by": "minutes", "clock_s": 2.2,
                   "env_steps": rows[-1]["env_steps"]}, f)
    for name in ("checkpoints/last.pt", "tb/events", "train.log"):
        with open(os.path.join(folder, name), "w") as f:
            f.write("large")


def a_study(pack):
    return {"name": "packed", "path": "packed.yaml", "source": "packed.yaml", "common": [], "arms": {"arm": []},
            "seeds": [0, 1], "stop": {}, "thresholds": [15.0], "marks_min": [], "compare": [], "predict": None,
            "archive": str(pack)}


def test_a_run_archived_into_a_pack_is_done_elsewhere_and_the_report_reads_it(tmp_path):
    pack = tmp_path / "kept" / "runs.tar.xz"
    study = a_study(pack)
    here = str(tmp_path / "here")
    finished_run(run_folder(here, "arm", 0), 0)
    archive_run(run_folder(here, "arm", 0), study, "arm", 0)
    assert sorted(archive.read(str(pack))) == ["arm/seed_0/.hydra/overrides.yaml", "arm/seed_0/config.yaml",
                                               "arm/seed_0/metrics.json", "arm/seed_0/metrics.jsonl",
                                               "arm/seed_0/study_done.json"]  # no checkpoints, tb, train.log
    elsewhere = str(tmp_path / "elsewhere")  # another machine: the pack alone
    found = finished_folder(elsewhere, study, "arm", 0)
    assert found and json.load(open(os.path.join(found, DONE)))["seed"] == 0
    assert finished_folder(elsewhere, study, "arm", 1) is None

    finished_run(run_folder(here, "arm", 1), 1, returns=(5.0, 12.0))  # a second run appended: the first kept
    archive_run(run_folder(here, "arm", 1), study, "arm", 1)
    assert {name.split("/")[1] for name in archive.read(str(pack))} == {"seed_0", "seed_1"}
    assert finished_folder(elsewhere, study, "arm", 1) is not None  # (the changed pack is read again)

    out = tmp_path / "report"
    assert report_study(study, str(tmp_path / "elsewhere"), str(out)) == 0
    summary = json.loads((out / "study.json").read_text())["arms"]["arm"]
    assert summary["runs"] == 2 and summary["to_15_reached"] == "1/2"
    assert not (out / "metrics.tar.xz").exists() and not (out / "metrics").exists()  # rows kept once: the pack


def test_a_run_archived_again_replaces_its_older_copy_whole(tmp_path):
    pack = str(tmp_path / "runs.tar.xz")
    folder = str(tmp_path / "run")
    finished_run(folder, 0)
    os.makedirs(os.path.join(folder, "extra"))
    open(os.path.join(folder, "extra", "old.txt"), "w").close()
    archive.add(pack, "arm/seed_0", folder)
    os.remove(os.path.join(folder, "extra", "old.txt"))
    archive.add(pack, "arm/seed_0", folder)
    assert "arm/seed_0/extra/old.txt" not in archive.read(pack)


def test_a_pack_is_deterministic(tmp_path):
    files = {"b/seed_1/metrics.jsonl": b'{"x": 1}\n', "a/seed_0/config.yaml": b"seed: 0\n"}
    archive.write(str(tmp_path / "one.tar.xz"), files)
    archive.write(str(tmp_path / "two.tar.xz"), dict(reversed(list(files.items()))))
    assert (tmp_path / "one.tar.xz").read_bytes() == (tmp_path / "two.tar.xz").read_bytes()
    assert archive.read(str(tmp_path / "one.tar.xz")) == files
    with tarfile.open(tmp_path / "one.tar.xz") as tar:  # (tar -xJf reads it too: a plain ustar/pax in xz)
        assert [m.name for m in tar] == sorted(files) and {m.mtime for m in tar} == {0}


def test_writing_a_pack_is_atomic_a_failure_leaves_the_previous_pack(tmp_path, monkeypatch):
    pack = str(tmp_path / "runs.tar.xz")
    before = {"arm/seed_0/metrics.jsonl": b"{}\n"}
    archive.write(pack, before)
    old_bytes = open(pack, "rb").read()
    calls = []
    real_addfile = tarfile.TarFile.addfile

    def failing_addfile(self, info, fileobj=None):
        calls.append(info.name)
        if len(calls) == 2:
            raise OSError("disk full")  # mid-write: one member written, the pack unfinished
        return real_addfile(self, info, fileobj)

    monkeypatch.setattr(tarfile.TarFile, "addfile", failing_addfile)
    with pytest.raises(OSError, match="disk full"):
        archive.write(pack, {**before, "arm/seed_1/metrics.jsonl": b"{}\n", "arm/seed_2/metrics.jsonl": b"{}\n"})
    monkeypatch.undo()
    assert open(pack, "rb").read() == old_bytes and archive.read(pack) == before
    assert os.listdir(tmp_path) == ["runs.tar.xz"]  # no temporary file left behind


def test_an_add_waits_for_another_process_holding_the_pack_so_neither_run_is_lost(tmp_path):
    # two study processes (one a core) finishing runs at once: each reads the pack, adds its run and rewrites it;
    # unlocked, the later write drops the run the earlier one added. Here this process holds the lock, as an add
    # between its read and its write would, while another process adds seed_1
    pack = str(tmp_path / "runs.tar.xz")
    finished_run(str(tmp_path / "seed_1"), 1)
    child = f"from isaac_ppo.lab import archive; archive.add({pack!r}, 'arm/seed_1', {str(tmp_path / 'seed_1')!r})"
    with archive.locked(pack):
        files = archive.read(pack)
        adder = subprocess.Popen([sys.executable, "-c", child])
        time.sleep(1.5)  # ample for the child to start and, unlocked, to write its pack
        assert adder.poll() is None and not os.path.exists(pack)  # it waits: nothing written under the lock
        files["arm/seed_0/metrics.jsonl"] = b"{}\n"
        archive.write(pack, files)
    assert adder.wait(timeout=60) == 0
    names = set(archive.read(pack))
    assert "arm/seed_0/metrics.jsonl" in names and f"arm/seed_1/{DONE}" in names  # both runs, none lost
    assert sorted(os.listdir(tmp_path)) == ["runs.tar.xz", "seed_1"]  # and no lock file beside the pack


def test_a_member_that_leaves_its_folder_is_refused(tmp_path):
    pack = tmp_path / "evil.tar.xz"
    with tarfile.open(pack, "w:xz") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(ValueError, match="not a plain relative path"):
        archive.read(str(pack))


def test_a_packed_run_is_shown_as_in_the_archive_folder_and_a_folder_archive_packs_with_one_command(tmp_path):
    folder = tmp_path / "runs"
    finished_run(str(folder / "arm" / "seed_0"), 0)
    assert archive.main(["pack", str(folder)]) == 0
    pack = str(tmp_path / "runs.tar.xz")
    assert sorted(archive.read(pack)) == sorted(archive.folder_files(str(folder)))
    assert "arm/seed_0/train.log" not in archive.read(pack)
    unpacked = archive.unpacked(pack)
    assert archive.shown(os.path.join(unpacked, "arm", "seed_0")) == str(folder / "arm" / "seed_0")
    assert archive.shown(str(tmp_path / "other")) == str(tmp_path / "other")
    assert archive.unpacked(pack) == unpacked  # extracted once while the pack is unchanged


def test_an_rl_games_runs_own_checkpoints_and_events_stay_out_of_the_archive(tmp_path):
    folder = tmp_path / "runs" / "rl_games" / "seed_0"
    finished_run(str(folder), 0)
    for name in ("nn/FrankaCubeStack.pth", "nn/last_FrankaCubeStack_ep_16_rew_1.5.pth", "summaries/events.out.x",
                 "rl_games_params.yaml"):
        os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
        with open(os.path.join(folder, name), "w") as f:
            f.write("large")
    kept = sorted(archive.folder_files(str(folder)))
    assert kept == sorted([".hydra/overrides.yaml", DONE, "config.yaml", "metrics.json", "metrics.jsonl",
                           "rl_games_params.yaml"])
