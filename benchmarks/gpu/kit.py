"""The GPU kit's logic: what travels to an offline GPU node, cut into which transfers, and how it is put back
together there (checksums checked, installed offline). Standard library only: pack.py calls it here, run.sh on
the node (Python 3.12 with no network), the tests on any Python.

  python3 kit.py receive FOLDER [--kit DIR]   # on the node: move a transfer's pieces out of FOLDER into the
                                              # kit, join every file whose pieces are all there, install it
  python3 kit.py estimate PLAN.json           # the slot's time estimate of a plan

A transfer is what one call of the device tool carries: the repository's working tree AND the carried folder, 64 MiB
in all. So a transfer's room is the limit less the tree (measured when packing: it changes), less a margin.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

MIB = 2 ** 20
LIMIT = 64 * MIB  # one transfer: the working tree and the carried folder together
MARGIN = 2 * MIB  # the tree growing between pack and send, the manifest, rounding
# the slot (seconds of device time): start-up, each transfer, the proof and one rerun of what failed in it
SLOT_S = 900
# Measured on three H100 loans (benchmarks/history/gpu-kit.md, its proofs): a start and transfer 1 held 34-38 s,
# each later call 5-8 s beyond its command, 62 MiB with the tree unpacked in 8-9 s; the figures below keep about
# 2x of margin
STARTUP_S = 60
CALL_S = 15  # one call's fixed cost: the tree's sync, the machine's answer, our receive/install command
RATE_BPS = 6 * MIB  # transfer rate assumed (measured: ~8 MiB/s)
PROOF_S = 540  # proof.py's own deadline: it runs in the call of the last transfer, whose limit is 600 s
RERUN_MIN_S = 60  # what must be left for one rerun of the steps that failed
KIT = os.environ.get("ISAAC_PPO_KIT", "/tmp/isaac-ppo-kit")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_bytes(repo: Path) -> int:
    """What the device tool sends besides a carried folder: tracked files and untracked files git does not ignore
    (as they are now: a file deleted but still tracked is not sent), and a shared/ folder inside the checkout."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            capture_output=True, check=True).stdout.decode().split("\0")
    total = sum((repo / name).stat().st_size for name in set(listed) if name and (repo / name).is_file())
    shared = repo / "shared"
    if shared.is_dir():
        total += sum(p.stat().st_size for p in shared.rglob("*") if p.is_file())
    return total


def plan(files: list, tree: int, limit: int = LIMIT, margin: int = MARGIN) -> dict:
    """Transfers for files ([{"name", "bytes", "sha256"}], in the order they should arrive): each file goes whole
    into the current transfer when it fits, else as many bytes as fit, the rest as pieces in the next ones."""
    room = limit - tree - margin
    if room <= 0:
        raise ValueError(f"the working tree ({tree / MIB:.1f} MiB) leaves no room in a {limit / MIB:.0f} MiB "
                         "transfer: make the tree smaller")
    transfers: list = [[]]
    used = 0
    pieces_of = {}
    for f in files:
        left, offset = f["bytes"], 0
        pieces_of[f["name"]] = []
        while left > 0:
            if used == room:
                transfers.append([])
                used = 0
            take = min(left, room - used)
            piece = {"file": f["name"], "offset": offset, "bytes": take}
            transfers[-1].append(piece)
            pieces_of[f["name"]].append(piece)
            used += take
            left -= take
            offset += take
    for name, pieces in pieces_of.items():
        for i, piece in enumerate(pieces, 1):
            piece.update(part=i, parts=len(pieces),
                         piece=name if len(pieces) == 1 else f"{name}.part{i:02d}of{len(pieces):02d}")
    count = len(transfers)
    out = []
    for i, pieces in enumerate(transfers, 1):
        folder = f"benchmarks/gpu/parts/t{i}"
        last = i == count
        command = f"bash benchmarks/gpu/run.sh receive {folder}" + (" && bash benchmarks/gpu/run.sh proof" if last
                                                                    else "")
        out.append({"index": i, "folder": folder, "pieces": pieces, "payload_bytes": sum(p["bytes"] for p in pieces),
                    "command": command, "carry": [folder]})
    return {"limit_bytes": limit, "tree_bytes": tree, "margin_bytes": margin, "room_bytes": room,
            "files": files, "transfers": out}


def estimate(the_plan: dict) -> dict:
    """The slot's device time: start-up, each transfer call (fixed cost + its bytes at RATE_BPS: the tree too,
    since each call sends it), the proof's deadline; what is left for one rerun."""
    calls = [CALL_S + (the_plan["tree_bytes"] + t["payload_bytes"]) / RATE_BPS for t in the_plan["transfers"]]
    used = STARTUP_S + sum(calls) + PROOF_S
    return {"startup_s": STARTUP_S, "transfer_s": [round(c, 1) for c in calls], "proof_s": PROOF_S,
            "total_before_rerun_s": round(used), "left_for_rerun_s": round(SLOT_S - used), "slot_s": SLOT_S,
            "fits": SLOT_S - used >= RERUN_MIN_S}


def transfer_bytes(the_plan: dict, transfer: dict) -> int:
    """What one call carries: the tree, the pieces, the manifest."""
    return the_plan["tree_bytes"] + transfer["payload_bytes"] + len(json.dumps(manifest(the_plan, transfer)))


def manifest(the_plan: dict, transfer: dict) -> dict:
    whole = {f["name"]: f for f in the_plan["files"]}
    return {"index": transfer["index"], "count": len(the_plan["transfers"]),
            "pieces": transfer["pieces"],
            "files": {p["file"]: {"bytes": whole[p["file"]]["bytes"], "sha256": whole[p["file"]]["sha256"]}
                      for p in transfer["pieces"]}}


def cut(the_plan: dict, sources: dict, out: Path) -> None:
    """Write each transfer's folder under out (t1, t2, ...; old ones removed): its pieces, read from sources (file
    name -> path), and transfer.json (each piece's sha256, each file's whole sha256)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("t[0-9]*"):
        shutil.rmtree(old)
    for transfer in the_plan["transfers"]:
        folder = out / f"t{transfer['index']}"
        folder.mkdir()
        for piece in transfer["pieces"]:
            with open(sources[piece["file"]], "rb") as f:
                f.seek(piece["offset"])
                data = f.read(piece["bytes"])
            (folder / piece["piece"]).write_bytes(data)
            piece["sha256"] = hashlib.sha256(data).hexdigest()
        (folder / "transfer.json").write_text(json.dumps(manifest(the_plan, transfer), indent=1))


def receive(folder: Path, kit: Path) -> list:
    """Move a transfer's pieces into kit/pieces (each checked against its sha256), join each file whose pieces are
    all there into kit/files (the whole checked against the file's sha256). Returns the files completed now."""
    info = json.loads((folder / "transfer.json").read_text())
    pieces_dir, files_dir = kit / "pieces", kit / "files"
    pieces_dir.mkdir(parents=True, exist_ok=True)
    files_dir.mkdir(parents=True, exist_ok=True)
    for piece in info["pieces"]:
        source = folder / piece["piece"]
        if sha256(source) != piece["sha256"]:
            raise ValueError(f"{source}: checksum differs from transfer.json: send this transfer again")
        shutil.move(str(source), str(pieces_dir / piece["piece"]))
        (pieces_dir / (piece["piece"] + ".json")).write_text(json.dumps(dict(piece, whole=info["files"][piece["file"]])))
    done = []
    for name, whole in info["files"].items():
        target = files_dir / name
        pieces = sorted(pieces_dir.glob(f"{name}.part*of*[0-9]")) if not (pieces_dir / name).exists() else \
            [pieces_dir / name]
        expected = json.loads((pieces_dir / (pieces[0].name + ".json")).read_text())["parts"] if pieces else 0
        if not pieces or len(pieces) < expected:
            continue  # (the rest comes in a later transfer)
        with open(target, "wb") as out:
            for piece in pieces:
                with open(piece, "rb") as f:
                    shutil.copyfileobj(f, out, MIB)
        if sha256(target) != whole["sha256"]:
            target.unlink()
            raise ValueError(f"{name}: joined from {len(pieces)} pieces, its checksum differs from the plan's")
        for piece in pieces:
            piece.unlink()
            (pieces_dir / (piece.name + ".json")).unlink()
        done.append(target)
    return done


def install(path: Path, kit: Path, python: str = sys.executable) -> str:
    """A completed file into the kit: a wheel or an sdist into kit/site (pip, no index, no dependencies: the plan
    names every one), warp's kernel cache (kernels-*.tar.xz) into kit/warp-cache."""
    if path.name.startswith("kernels-"):
        with tarfile.open(path) as tar:
            if hasattr(tarfile, "data_filter"):  # (Python >= 3.11.4, 3.12: no paths outside the folder)
                tar.extractall(kit / "warp-cache", filter="data")
            else:
                tar.extractall(kit / "warp-cache")
        return f"unpacked into {kit / 'warp-cache'}"
    command = [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation",
               "--no-compile", "--no-cache-dir", "--upgrade", "--target", str(kit / "site"), str(path)]
    subprocess.run(command, check=True)
    return f"installed into {kit / 'site'}"


def main(argv: list) -> int:
    if len(argv) >= 2 and argv[0] == "receive":
        kit = Path(argv[argv.index("--kit") + 1]) if "--kit" in argv else Path(KIT)
        for path in receive(Path(argv[1]), kit):
            print(f"[kit] {path.name}: checksum ok, {install(path, kit)}", flush=True)
        return 0
    if len(argv) == 2 and argv[0] == "estimate":
        print(json.dumps(estimate(json.loads(Path(argv[1]).read_text()))))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
