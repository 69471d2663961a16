"""The GPU kit's packer, run where there is network: download the exact files an offline GPU node needs (cp312,
manylinux x86_64; lock.json pins each by name, version and sha256), repack warp-lang smaller, compile MuJoCo Warp's
kernels ahead of time for the node's GPU, cut everything into transfers that fit beside the working tree, and write
the plan (parts/plan.json and parts/PLAN.md: each transfer's folder, size and command).

  python benchmarks/gpu/pack.py [--arch 90] [--no-kernels] [--no-repack] [--relock]

Downloads go to benchmarks/gpu/wheels/, the transfers to benchmarks/gpu/parts/t1, t2, ... (both ignored by git).
--relock: write lock.json from what was downloaded (after a pin changes), instead of checking against it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import kit  # noqa: E402  (beside this file)

REPO = HERE.parents[1]
WHEELS, PARTS, LOCK = HERE / "wheels", HERE / "parts", HERE / "lock.json"
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]


def download(pin: str, sdist: bool) -> None:
    what = ["--no-binary=:all:"] if sdist else ["--only-binary=:all:", "--python-version", "3.12", "--implementation",
                                                "cp"] + [a for p in PLATFORMS for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *what, "-d", str(WHEELS), pin],
                   check=True)


def repack(source: Path, target: Path) -> None:
    """The same wheel, its members LZMA-compressed instead of deflated (warp's two shared libraries shrink from 143
    to ~100 MB); the same names, order and dates, so the same bytes each time. pip reads it with Python's zipfile."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(partial, "w", zipfile.ZIP_LZMA) as new:
        for info in old.infolist():
            member = zipfile.ZipInfo(info.filename, info.date_time)
            member.external_attr, member.compress_type = info.external_attr, zipfile.ZIP_LZMA
            new.writestr(member, old.read(info))
    partial.rename(target)


def models_fingerprint() -> str:
    """What the kernels are compiled for: the task registry, every task model file, the precompile script and the
    pinned MuJoCo Warp (lock.json), hashed. A new or changed task changes it, and so recompiles the kernels (a stale
    tarball would leave the node compiling the new task's kernels inside the proof's deadline)."""
    digest = hashlib.sha256()
    files = sorted([REPO / "tasks" / "__init__.py", REPO / "docker" / "mjwarp_precompile.py", LOCK]
                   + list((REPO / "tasks").glob("*/assets/*.xml")))
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def kernels(arch: int) -> Path:
    """docker/mjwarp_precompile.py (the mjwarp image's step) into a cache of our own; its CUDA kernels for arch
    (sm_90: H100, H200) and their .meta files as one tar.xz, unpacked into the node's WARP_CACHE_PATH. Named by the
    models' fingerprint: compiled again (and older tarballs for arch removed) when the tasks or their models change."""
    cache, target = WHEELS / "warp-cache", WHEELS / f"kernels-sm{arch}-{models_fingerprint()}.tar.xz"
    if not target.exists():
        for old in WHEELS.glob(f"kernels-sm{arch}*.tar.xz"):
            old.unlink()
        env = dict(os.environ, WARP_CACHE_PATH=str(cache), CUDA_VISIBLE_DEVICES="")
        subprocess.run([sys.executable, str(REPO / "docker" / "mjwarp_precompile.py"), str(arch)], check=True, env=env)
        members = sorted(p for p in cache.rglob("*") if p.name.endswith((f".sm{arch}.cubin", ".meta")))
        with tarfile.open(target, "w:xz") as tar:
            for path in members:
                info = tar.gettarinfo(str(path), str(path.relative_to(cache)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                with open(path, "rb") as f:
                    tar.addfile(info, f)
    return target


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90, help="CUDA compute capability of the node's GPU (90: H100, H200)")
    parser.add_argument("--no-kernels", action="store_true", help="carry no ahead-of-time kernels")
    parser.add_argument("--no-repack", action="store_true", help="carry warp-lang's wheel as PyPI has it (149 MB)")
    parser.add_argument("--relock", action="store_true")
    args = parser.parse_args(argv)
    lock = json.loads(LOCK.read_text())
    WHEELS.mkdir(parents=True, exist_ok=True)
    carried = []
    for entry in lock["files"]:
        path = WHEELS / entry["name"]
        if not path.exists():
            download(entry["pin"], entry.get("sdist", False))
        if not path.exists():
            raise SystemExit(f"pip download {entry['pin']} did not write {entry['name']}: a pin or a platform differs")
        digest, size = kit.sha256(path), path.stat().st_size
        if args.relock:
            entry.update(sha256=digest, bytes=size)
        elif digest != entry["sha256"]:
            raise SystemExit(f"{path.name}: sha256 {digest} is not lock.json's {entry['sha256']}")
        if entry.get("repack") and not args.no_repack:
            packed = WHEELS / "repacked" / entry["name"]
            if not packed.exists():
                started = time.perf_counter()
                repack(path, packed)
                print(f"[pack] {entry['name']}: repacked with LZMA in {time.perf_counter() - started:.0f} s", flush=True)
            entry["repacked"] = {"bytes": packed.stat().st_size, "sha256": kit.sha256(packed)}
            path = packed
        carried.append({"name": path.name, "bytes": path.stat().st_size, "sha256": kit.sha256(path), "path": str(path)})
    if not args.no_kernels:
        path = kernels(args.arch)
        lock["kernels"] = {"name": path.name, "bytes": path.stat().st_size, "arch": args.arch}
        carried.append({"name": path.name, "bytes": path.stat().st_size, "sha256": kit.sha256(path), "path": str(path)})
    if args.relock:
        LOCK.write_text(json.dumps(lock, indent=1) + "\n")
    carried.sort(key=lambda f: (f["bytes"] > 20 * kit.MIB, f["name"]))  # the small ones first, installed at once
    tree = kit.tree_bytes(REPO)
    plan = kit.plan([{k: f[k] for k in ("name", "bytes", "sha256")} for f in carried], tree)
    kit.cut(plan, {f["name"]: Path(f["path"]) for f in carried}, PARTS)
    plan["estimate"] = kit.estimate(plan)
    plan["left_out"] = lock["left_out"]
    (PARTS / "plan.json").write_text(json.dumps(plan, indent=1))
    text = describe(plan)
    (PARTS / "PLAN.md").write_text(text)
    print(text)
    return 0


def describe(plan: dict) -> str:
    mib = kit.MIB
    e = plan["estimate"]
    lines = [f"# GPU kit: {len(plan['transfers'])} transfers", "",
             f"Each transfer is one call of the device tool (or one scp to any node): the working tree "
             f"({plan['tree_bytes'] / mib:.1f} MiB, measured now) and one folder of benchmarks/gpu/parts/, at most "
             f"{plan['limit_bytes'] / mib:.0f} MiB together (room for {plan['room_bytes'] / mib:.1f} MiB of parts after "
             f"a {plan['margin_bytes'] / mib:.0f} MiB margin). Issue them back to back: the machine goes back after "
             "30 s without a call.", "",
             "| # | carry | parts MiB | with the tree MiB | pieces | command |", "|---|---|---|---|---|---|"]
    for t in plan["transfers"]:
        pieces = ", ".join(p["piece"] for p in t["pieces"])
        lines.append(f"| {t['index']} | `{t['folder']}` | {t['payload_bytes'] / mib:.1f} | "
                     f"{kit.transfer_bytes(plan, t) / mib:.1f} | {pieces} | `{t['command']}` |")
    lines += ["", f"Device time (estimate): start-up {e['startup_s']} s, transfers {sum(e['transfer_s']):.0f} s "
              f"({', '.join(f'{s:.0f}' for s in e['transfer_s'])}), the proof at most {e['proof_s']} s: "
              f"{e['total_before_rerun_s']} s of {e['slot_s']}; {e['left_for_rerun_s']} s left for "
              "`bash benchmarks/gpu/run.sh proof --rerun` (the failed steps again).", "",
              "Or, for a policy trained on the GPU and checked back home (docs/backends.md, \"A training instead of "
              "the proof\"): the last transfer's command `bash benchmarks/gpu/run.sh receive "
              f"{plan['transfers'][-1]['folder']} && bash benchmarks/gpu/run.sh train ShadowHand 440`, then `bash "
              "benchmarks/gpu/run.sh proof --only environment,kernels,equivalence` in what is left.", "",
              "Left out (not imported by training, tests or the proof): " +
              "; ".join(f"{x['pin']} ({x['why']})" for x in plan["left_out"]), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
