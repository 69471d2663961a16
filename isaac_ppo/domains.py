"""The domain of a config value, declared once where the value is read (a task declares its parameters'), and
checked at the config boundary before anything is built: a value outside is one line naming the key, the value
and the domain. Also the rule that no float anywhere in a config may be NaN or infinite.

Why declared beside the code that reads a value: the task module knows that a timestep must be positive or that
a motor's effort below zero reverses it; a rule kept elsewhere drifts from the code, and every new task adds keys.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Mapping, Optional, Tuple

from isaac_ppo.errors import UserError

PROPORTIONS_TOLERANCE = 1e-6  # (a YAML list of decimals such as [0.1, 0.1, 0.35, 0.25, 0.2] sums to 1 within 2e-16)


@dataclasses.dataclass(frozen=True)
class Domain:
    # "real", "int", "bool", "choice", "pair" (a [min, max] list of two reals, min <= max), "proportions" (a list
    # of `count` shares, each >= 0, summing to 1) or "thresholds" (a list of reals, each in [low, high])
    kind: str
    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False  # (low, ...: the bound itself is outside
    high_open: bool = False
    choices: Tuple[Any, ...] = ()
    optional: bool = False  # null is allowed (the code then takes its default)
    count: int = 0  # (proportions: how many)

    def describe(self) -> str:
        if self.kind == "bool":
            text = "true or false"
        elif self.kind == "choice":
            text = "one of " + ", ".join(str(c) for c in self.choices)
        elif self.kind == "proportions":
            text = f"a list of {self.count} proportions, each >= 0, summing to 1"
        elif self.kind == "thresholds":
            text = f"a list of numbers, each in {_interval(self)}"
        else:
            kind = {"int": "an integer", "real": "a number", "pair": "a pair [min, max], min <= max, of numbers"}
            text = f"{kind[self.kind]} in {_interval(self)}"
        return text + (" or null" if self.optional else "")

    def admits(self, value: Any) -> bool:
        if value is None:
            return self.optional
        if self.kind == "bool":
            return isinstance(value, bool)  # (not 0 or 1: a number where a switch is meant is a typo)
        if self.kind == "choice":
            return value in self.choices
        if self.kind == "pair":
            return (isinstance(value, (list, tuple)) and len(value) == 2 and all(map(self._admits_number, value))
                    and value[0] <= value[1])
        if self.kind == "proportions":
            return (isinstance(value, (list, tuple)) and len(value) == self.count
                    and all(map(self._admits_number, value)) and abs(sum(value) - 1.0) <= PROPORTIONS_TOLERANCE)
        if self.kind == "thresholds":
            return isinstance(value, (list, tuple)) and all(map(self._admits_number, value))
        return self._admits_number(value)

    def _admits_number(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind == "int" and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (value == self.low and self.low_open)):
            return False
        return self.high is None or value < self.high or (value == self.high and not self.high_open)


def _interval(domain: Domain) -> str:
    low = "-inf" if domain.low is None else f"{domain.low:g}"
    high = "inf" if domain.high is None else f"{domain.high:g}"
    left = "(" if domain.low is None or domain.low_open else "["
    right = ")" if domain.high is None or domain.high_open else "]"
    return f"{left}{low}, {high}{right}"


def real(low: Optional[float] = None, high: Optional[float] = None, *, low_open: bool = False,
         high_open: bool = False, optional: bool = False) -> Domain:
    return Domain("real", low, high, low_open, high_open, optional=optional)


def positive(optional: bool = False) -> Domain:
    """A number above 0 (a length, a time step, a scale that a sign would turn around)."""
    return real(0.0, low_open=True, optional=optional)


def integer(low: Optional[int] = None, high: Optional[int] = None, optional: bool = False) -> Domain:
    return Domain("int", low, high, optional=optional)


def pair(low: Optional[float] = None, high: Optional[float] = None, *, low_open: bool = False,
         optional: bool = False) -> Domain:
    """[min, max] with min <= max, both in [low, high] ((low, high] with low_open): a command range, a
    randomisation interval."""
    return Domain("pair", low, high, low_open=low_open, optional=optional)


def proportions(count: int) -> Domain:
    """count shares of a whole, each >= 0, summing to 1 (within PROPORTIONS_TOLERANCE): a terrain's kinds."""
    return Domain("proportions", 0.0, count=count)


def thresholds(low: Optional[float] = None, high: Optional[float] = None) -> Domain:
    """A list of numbers, each in [low, high]: the levels of an evaluation measure that count as solving a task
    (a task's solve_measures)."""
    return Domain("thresholds", low, high)


def boolean(optional: bool = False) -> Domain:
    return Domain("bool", optional=optional)


def choice(*choices: Any, optional: bool = False) -> Domain:
    return Domain("choice", choices=tuple(choices), optional=optional)


def flat(tree: Any, prefix: str = "") -> Dict[str, Any]:
    """A nested config as dotted keys -> leaves (lists are leaves)."""
    if not isinstance(tree, Mapping):
        return {prefix: tree}
    found: Dict[str, Any] = {}
    for key, value in tree.items():
        found.update(flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return found


def closest_key(key: str, keys: Any) -> Optional[str]:
    """The known dotted key a mistyped one most likely meant (a sibling first: num_env -> num_envs,
    task.env.episodeLenght -> task.env.episodeLength), or None when none is close."""
    import difflib

    keys = list(keys)
    parent = key.rpartition(".")[0]
    for pool in ([k for k in keys if k.rpartition(".")[0] == parent], keys):
        found = difflib.get_close_matches(key, pool, n=1, cutoff=0.8)
        if found:
            return found[0]
    return None


def did_you_mean(key: str, keys: Any) -> str:
    """' (did you mean KEY?)' for the closest known key, or '' when none is close."""
    close = closest_key(key, keys)
    return f" (did you mean {close}?)" if close else ""


def outside(key: str, value: Any, describe: str) -> str:
    """The one-line refusal of a value outside its domain (the config's keys and the lab commands' own)."""
    return f"{key}={value!r} is outside its domain: {describe}"


def check(values: Mapping[str, Any], domains: Mapping[str, Domain], prefix: str = "") -> None:
    """Raise UserError for the first declared key whose value is outside its domain."""
    for key, domain in domains.items():
        if key in values and not domain.admits(values[key]):
            raise UserError(outside(prefix + key, values[key], domain.describe()))


def check_finite(values: Mapping[str, Any]) -> None:
    """No NaN or infinity anywhere (a float in a list too): one line naming the first such key."""
    for key, value in values.items():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, float) and not math.isfinite(item):
                raise UserError(f"{key}={value!r}: a config value must be a finite number (NaN and infinities are "
                                "refused)")
