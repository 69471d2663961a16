"""The stop requests a run honours, the same for both agents (isaac_ppo's loop and rl-games').

SIGTERM and Ctrl-C stop a run at the end of its iteration, with its last checkpoint saved; so does SIGUSR2,
the signal a submitit (SLURM) job gets before its time limit or on preemption. A second signal aborts at once.
"""
from __future__ import annotations

import signal
from typing import Any, Dict, Optional

# the exit status of a command that a stop signal ended early, its work saved and continued by the same command
# (EX_TEMPFAIL of sysexits.h): isaac-ppo-train, isaac-ppo-tune and isaac-ppo-study
STOPPED = 75
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGUSR2") if hasattr(signal, name))


class StopRequests:
    """Within `with StopRequests(...)`, the stop signals set `requested` (the signal's name) instead of
    ending the process; the handlers that were there before come back on the way out."""

    def __init__(self, what_happens: str):
        self.what_happens = what_happens  # said when a request arrives, e.g. "saving a checkpoint at ..."
        self.requested: Optional[str] = None
        self.previous: Dict[int, Any] = {}

    def __enter__(self) -> "StopRequests":
        self.previous = {sig: signal.signal(sig, self._request) for sig in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def _request(self, signum: int, frame: Any) -> None:
        if self.requested is not None:  # a second signal: stop now, the last checkpoint stays the previous one
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name
        print(f"\n{self.requested}: {self.what_happens} (again to abort)")

    def hand_on_preemption(self) -> None:
        """After the last checkpoint is saved, pass SIGUSR2 on to the handler that was there before the run:
        under submitit that handler requeues the job (which resumes in place from last.pt) and exits."""
        usr2 = getattr(signal, "SIGUSR2", None)
        handler = self.previous.get(usr2) if usr2 is not None and self.requested == "SIGUSR2" else None
        if callable(handler):
            handler(usr2, None)
