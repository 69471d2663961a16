"""How every lab command reads its arguments (isaac-ppo-study, -tune, -bench, -report; isaac-ppo-export too):
KEY=VALUE words, as isaac-ppo-train's overrides are typed, so one command line style serves all of them.

A word is the command's own key (KEY=VALUE, or --KEY VALUE / --KEY=VALUE for the report's older flags), an
isaac-ppo-train override handed on to the runs the command starts (only where the command starts runs), or a
positional word (only where the command takes some, e.g. the report's folders). Anything else is one line naming
the word and the keys the command knows.

Each command declares its own keys once, as key -> Arg: how the text reads and the domain the value must lie in
(isaac_ppo/domains.py's Domain for numbers and choices; words for names, lists and paths). parse() reads and checks
every key given before the command does anything, so a value outside is one line in isaac-ppo-train's format
("KEY=VALUE is outside its domain: ..."), and nothing is made on disk: a folder the command writes under is
checked writable here (config/checks.py's check_writable, as isaac-ppo-train checks runs_dir).
"""
from __future__ import annotations

import dataclasses
import os
import re
import sys
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

from isaac_ppo import preload
from isaac_ppo.config.checks import check_writable
from isaac_ppo.domains import Domain, outside
from isaac_ppo.config.files import cfg_dir
from isaac_ppo.domains import choice as _choice
from isaac_ppo.errors import UserError

NAME = re.compile(r"[A-Za-z0-9_.-]+")  # a name that becomes a folder: nothing a path or a shell reads otherwise


@dataclasses.dataclass(frozen=True)
class Arg:
    """One own key: read turns its text into the value (a ValueError: the text is outside the domain), which must
    then lie in domain (when one is declared); check, when given, looks at the disk (key, value) before anything
    is written. describe is the domain in words, the end of the one-line refusal."""
    read: Callable[[str], Any]
    describe: str
    domain: Optional[Domain] = None
    check: Optional[Callable[[str, Any], None]] = None

    def value(self, key: str, text: str) -> Any:
        try:
            value = self.read(text)
        except ValueError:
            raise UserError(outside(key, text, self.describe)) from None
        if self.domain is not None and not self.domain.admits(value):
            raise UserError(outside(key, value, self.describe))
        if self.check is not None:
            self.check(key, value)
        return value


def number(domain: Domain) -> Arg:
    """An integer or a real (domains.integer, real, positive): NaN and infinities are outside every one of them
    (Domain.admits), and '1.5' or '1e3' is no integer."""
    return Arg(int if domain.kind == "int" else float, domain.describe(), domain)


def one_of(*choices: str) -> Arg:
    domain = _choice(*choices)
    return Arg(str, domain.describe(), domain)


def flag() -> Arg:
    return Arg(_bool, "true or false")


def text(describe: str = "a non-empty text", pattern: Optional[str] = None) -> Arg:
    """Any text but an empty one (a metric, a search space), or one that matches pattern whole."""
    compiled = re.compile(pattern) if pattern else None

    def read(given: str) -> str:
        if not given.strip() or (compiled is not None and not compiled.fullmatch(given)):
            raise ValueError(given)
        return given
    return Arg(read, describe)


def name(describe: str = "a name: letters, digits, '_', '.', '-' (it names a folder)") -> Arg:
    return text(describe, NAME.pattern)


def task() -> Arg:
    """A task with a config in cfg/task/ (what isaac-ppo-train's task= and make() take), listed without importing
    the tasks (torch)."""
    folder = cfg_dir("task")
    return one_of(*sorted(file[:-len(".yaml")] for file in os.listdir(folder) if file.endswith(".yaml")))


def names(describe: str = "a comma-separated list of names (letters, digits, '_', '.', '-')") -> Arg:
    """A non-empty comma-separated list of names; which names the command knows, it checks itself."""
    return Arg(lambda given: _items(given, name().read), describe)


def integers(domain: Domain) -> Arg:
    """A non-empty comma-separated list of integers, each in domain (seeds=0,1,2)."""
    def read(text: str) -> List[int]:
        values = _items(text, int)
        if not all(domain.admits(value) for value in values):
            raise ValueError(text)
        return values
    bounded = domain.low is not None or domain.high is not None
    return Arg(read, "a comma-separated list of integers" + (f", each {domain.describe()}" if bounded else ""))


def folder(writes: bool = True) -> Arg:
    """A folder. One the command makes files under (writes): it, or the nearest folder above it that exists, must
    be writable, checked before anything is made, so a refusal leaves no folder half made."""
    if not writes:
        return text("a folder path")
    return dataclasses.replace(text("a folder path you can write"), check=check_writable)


def out_file() -> Arg:
    """A file the command writes: not a folder, and its folder (made if missing) writable."""
    def read(given: str) -> str:
        if not given.strip() or os.path.isdir(given):
            raise ValueError(given)
        return given
    return Arg(read, "a file path you can write (not a folder)", check=_writable_file)


def existing_file(describe: str = "an existing file") -> Arg:
    def read(given: str) -> str:
        if not os.path.isfile(given):
            raise ValueError(given)
        return given
    return Arg(read, describe)


@dataclasses.dataclass
class Words:
    own: Dict[str, Any]  # the command's own keys given, each read and checked (the last one given wins)
    train: List[str]  # isaac-ppo-train overrides handed on, in order
    positional: List[str]  # words without '='


def run_command(prog: str, help_text: str, argv: Sequence[str], body: Callable[[List[str]], int]) -> int:
    """A lab command's frame: no words or -h/--help print help_text (no words: exit 2), and a UserError from body is
    one line on stderr with exit status 2; body's own status otherwise."""
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(help_text)
        return 0 if argv else 2
    preload.idle_threads_sleep()  # (before torch: the command's own and the runs it starts)
    try:
        return body(argv)
    except UserError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2


def key_of(word: str) -> str:
    """The key a KEY=VALUE word sets (Hydra's +key= and ~key= prefixes dropped)."""
    return word.partition("=")[0].lstrip("+~")


def parse(argv: Iterable[str], own_keys: Mapping[str, Arg], usage: str, *, hands_on: bool = False,
          positional: bool = False) -> Words:
    """The words of argv sorted into the command's own keys (each read and checked against its Arg, in the order
    first given), the overrides it hands on (hands_on) and its positional words (positional); anything else, or a
    value outside its domain, raises UserError naming the word."""
    texts: Dict[str, str] = {}
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
            texts[key] = value
        elif "=" in word:
            if key_of(word) in own_keys and not word.startswith(("+", "~")):
                texts[key_of(word)] = word.partition("=")[2]
            elif hands_on:
                words.train.append(word)
            else:
                raise UserError(f"unknown argument {word!r}: {_known(own_keys, usage)}")
        elif positional:
            words.positional.append(word)
        else:
            raise UserError(f"{word!r} is not KEY=VALUE: {_known(own_keys, usage)}")
    words.own = {key: own_keys[key].value(key, value) for key, value in texts.items()}
    return words


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(text)
    return text.lower() == "true"


def _items(text: str, read: Callable[[str], Any]) -> List[Any]:
    items = [item.strip() for item in text.split(",")]
    if not all(items):  # '' or '0,,1': an empty item is a slip, never a silent nothing
        raise ValueError(text)
    return [read(item) for item in items]


def _writable_file(key: str, path: str) -> None:
    check_writable(key, os.path.dirname(os.path.abspath(path)))


def _known(own_keys: Iterable[str], usage: str) -> str:
    keys = ", ".join(f"{k}=" for k in own_keys)
    return f"this command takes {keys}" + (f" ({usage})" if usage else "")
