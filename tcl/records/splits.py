"""The dataset split by network: train, validation and held-out test networks, read from a TOML file.

A split is by network, not by task, so that a held-out score says how a model does on a
network it never saw. A workload shared by networks of several parts belongs to the most
held-out of them (test, then validation): a task of a test network is never trained on,
even when a training network also has it (the rule of ``tcl.learning.record_sets.split_by_network``).

File format (``data/split.toml`` is the project's)::

    format = "tcl-split"
    version = 1
    train = ["resnet-18", ...]
    validation = ["vit-base", ...]
    test = ["resnext-50", ...]
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Iterable, Mapping

import attrs

from tcl.api.errors import TclError

SPLIT_FORMAT = "tcl-split"
SPLIT_VERSION = 1
PARTS = ("train", "validation", "test")


@attrs.frozen
class Split:
    """Network names of each part (disjoint)."""

    train: tuple[str, ...]
    validation: tuple[str, ...]
    test: tuple[str, ...]

    @property
    def networks(self) -> tuple[str, ...]:
        return self.train + self.validation + self.test

    def assign_tasks(self, tasks: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
        """Task keys of each part, from ``{network: its task keys}``: a key shared by parts goes
        to the most held-out one (test, then validation). Networks outside the split are ignored."""
        out: dict[str, set[str]] = {part: set() for part in PARTS}
        for part in reversed(PARTS):  # test first
            taken = set().union(*out.values())
            for network in getattr(self, part):
                out[part].update(k for k in tasks.get(network, ()) if k not in taken)
        return out


def load_split(path: str | os.PathLike) -> Split:
    """Read a split file; a malformed one is a TclError naming the file and the problem."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TclError(f"cannot read split file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise TclError(f"{path}: not valid TOML ({exc})") from None
    if data.get("format") != SPLIT_FORMAT or data.get("version") != SPLIT_VERSION:
        raise TclError(f'{path}: expected format = "{SPLIT_FORMAT}" and version = {SPLIT_VERSION}')
    unknown = sorted(set(data) - {"format", "version", *PARTS})
    if unknown:
        raise TclError(f"{path}: unknown key(s) {', '.join(unknown)}; a split has {', '.join(PARTS)}")
    parts: dict[str, tuple[str, ...]] = {}
    for part in PARTS:
        names = data.get(part, [])
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise TclError(f"{path}: {part} must be a list of network names")
        parts[part] = tuple(names)
    seen: dict[str, str] = {}
    for part, names in parts.items():
        for name in names:
            if name in seen:
                raise TclError(f"{path}: network {name} is in both {seen[name]} and {part}")
            seen[name] = part
    if not parts["train"] or not parts["test"]:
        raise TclError(f"{path}: a split needs at least one train and one test network")
    return Split(**parts)
