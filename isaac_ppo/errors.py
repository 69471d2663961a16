"""The one exception type for mistakes a user can fix (bad input, missing file, backend not installed).

Console scripts print a UserError as one line and exit with status 2, without a traceback; everything else is
a bug and keeps its traceback.
"""
from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix; its message names the key or file and what would fix it."""


class InputError(UserError, ValueError):
    """Bad values handed to an env (actions, sizes); a ValueError too, for callers that catch those."""


class NonFiniteError(UserError):
    """Training met a NaN or an infinity; the message names the quantity (and env ids for observations). Nothing
    non-finite is written: the last checkpoint on disk is the last good one."""
