"""The exception types a console script prints as one line, without a traceback.

UserError: a mistake the user can fix (bad input, missing file, backend not installed): exit status 2.
RunFailure: the machine let the run down (disk full, a file size limit): exit status 1.
Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix; its message names the key or file and what would fix it."""


class InputError(UserError, ValueError):
    """Bad values handed to an env (actions, sizes); a ValueError too, for callers that catch those."""


class DivergedError(UserError):
    """Too many simulations diverged (config.yaml's max_diverged_fraction): the task's scales or timestep are
    likely wrong; the message names them."""


class NonFiniteError(UserError):
    """Training met a NaN or an infinity; the message names the quantity (and env ids for observations). Nothing
    non-finite is written: the last checkpoint on disk is the last good one."""


class RunFailure(Exception):
    """A run could not write its files (no space left, a file size limit, a directory gone). The message says what
    failed and whether last.pt was saved: what the run did up to there is kept."""
