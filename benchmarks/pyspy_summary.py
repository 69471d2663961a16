"""Where a training process spends its time, from a py-spy raw profile: the share of samples per function,
inclusive (the function and what it calls) and self (the function's own line was on top).

    pip install py-spy
    py-spy record -p PID --duration 60 --rate 50 --format raw -o PROFILE.txt --nonblocking
    python benchmarks/pyspy_summary.py PROFILE.txt [TOP]

Attaching to a run already going (isaac-ppo-train or agent=rl_games alike) adds no second workload to the
machine, which is why the peers comparison was profiled this way. Frames of Hydra's and our CLI's entry are left
out of the list: every sample passes through them.
"""
from __future__ import annotations

import collections
import sys

ENTRY_FRAMES = ("hydra/", "isaac_ppo/train.py", "<module>")


def summarise(path: str, top: int = 40) -> None:
    inclusive: collections.Counter = collections.Counter()
    own: collections.Counter = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            if not stack:
                continue
            n = int(count)
            total += n
            frames = stack.split(";")
            for frame in set(frames):  # a recursive frame counts once per sample
                inclusive[frame] += n
            own[frames[-1]] += n
    print(f"{path}: {total} samples")
    for title, counter in (("inclusive", inclusive), ("self", own)):
        print(f"-- {title}")
        shown = [(frame, n) for frame, n in counter.most_common() if not any(e in frame for e in ENTRY_FRAMES)]
        for frame, n in shown[:top]:
            print(f"{100.0 * n / total:5.1f}%  {frame}")


if __name__ == "__main__":
    summarise(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
