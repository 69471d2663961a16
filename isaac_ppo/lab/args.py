"""How every lab command reads its arguments (isaac-ppo-study, -tune, -bench, -report; isaac-ppo-export too):
KEY=VALUE words, as isaac-ppo-train's overrides are typed, so one command line style serves all of them.

A word is the command's own key (KEY=VALUE, or --KEY VALUE / --KEY=VALUE for the report's older flags), an
isaac-ppo-train override handed on to the runs the command starts (only where the command starts runs), or a
positional word (only where the command takes some, e.g. the report's folders). Anything else is one line naming
the word and the keys the command knows.
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Callable, Dict, Iterable, List, Sequence

from isaac_ppo.errors import UserError


@dataclasses.dataclass
class Words:
    own: Dict[str, str]  # the command's own keys, as given (the last one given wins)
    train: List[str]  # isaac-ppo-train overrides handed on, in order
    positional: List[str]  # words without '='


def run_command(prog: str, help_text: str, argv: Sequence[str], body: Callable[[List[str]], int]) -> int:
    """A lab command's frame: no words or -h/--help print help_text (no words: exit 2), and a UserError from body is
    one line on stderr with exit status 2; body's own status otherwise."""
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(help_text)
        return 0 if argv else 2
    try:
        return body(argv)
    except UserError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2


def key_of(word: str) -> str:
    """The key a KEY=VALUE word sets (Hydra's +key= and ~key= prefixes dropped)."""
    return word.partition("=")[0].lstrip("+~")


def parse(argv: Iterable[str], own_keys: Iterable[str], usage: str, *, hands_on: bool = False,
          positional: bool = False) -> Words:
    """The words of argv sorted into the command's own keys, the overrides it hands on (hands_on) and its
    positional words (positional); anything else raises UserError naming the word."""
    own_keys = tuple(own_keys)
    words = Words({}, [], [])
    argv = list(argv)
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word.startswith("--"):
            key, sep, value = word[2:].partition("=")
            if key not in own_keys:
                raise UserError(f"unknown flag {word!r}: {_known(own_keys, usage)}")
            if not sep:
                if i == len(argv):
                    raise UserError(f"{word} needs a value: {key}=VALUE")
                value, i = argv[i], i + 1
            words.own[key] = value
        elif "=" in word:
            if key_of(word) in own_keys and not word.startswith(("+", "~")):
                words.own[key_of(word)] = word.partition("=")[2]
            elif hands_on:
                words.train.append(word)
            else:
                raise UserError(f"unknown argument {word!r}: {_known(own_keys, usage)}")
        elif positional:
            words.positional.append(word)
        else:
            raise UserError(f"{word!r} is not KEY=VALUE: {_known(own_keys, usage)}")
    return words


def integer(words: Words, key: str, default: int, minimum: int) -> int:
    """The own key as a whole number (default when not given); below minimum or not a number: one line."""
    text = words.own.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"{key}={text}: a whole number, at least {minimum}") from None
    if value < minimum:
        raise UserError(f"{key}={value}: at least {minimum}")
    return value


def _known(own_keys: Iterable[str], usage: str) -> str:
    keys = ", ".join(f"{k}=" for k in own_keys)
    return f"this command takes {keys}" + (f" ({usage})" if usage else "")
