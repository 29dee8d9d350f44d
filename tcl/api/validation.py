"""The range and type rules of numeric settings, one set for every way they arrive: command-
line options, config files and cost-model options (a checkpoint's too). Each rule raises a
one-line :class:`TclError` before any work starts."""

from __future__ import annotations

import argparse
import math
from typing import Any, Callable

from tcl.api.errors import TclError


def _label(what: str) -> str:
    return f"{what} " if what else ""


def whole(value: Any, what: str = "", minimum: int = 1) -> int:
    """``value`` if it is a whole number of at least ``minimum`` (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TclError(f"{_label(what)}must be a whole number >= {minimum}, got {value!r}")
    return value


def number(value: Any, what: str = "", *, minimum: float = 0.0, inclusive: bool = False) -> float:
    """``value`` if it is a finite number above ``minimum`` (or equal to it, ``inclusive``)."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and (value >= minimum if inclusive else value > minimum)
    )
    if not ok:
        raise TclError(f"{_label(what)}must be a finite number {'>=' if inclusive else '>'} {minimum:g}, got {value!r}")
    return float(value)


def fraction(value: Any, what: str = "", *, one: bool = True) -> float:
    """``value`` if it is a share in [0, 1] (in [0, 1) when ``one`` is false)."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and (0 <= value <= 1 if one else 0 <= value < 1)
    )
    if not ok:
        raise TclError(f"{_label(what)}must be a fraction in [0, {'1]' if one else '1)'}, got {value!r}")
    return float(value)


def budget(value: Any, what: str = "") -> float:
    """A per-task budget: a fraction in (0, 1] or a whole count of programs >= 2 (1 is the fraction 1.0)."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and (0 < value <= 1 or (value > 1 and value == int(value)))
    )
    if not ok:
        raise TclError(f"{_label(what)}must be a fraction in (0, 1] or a whole count of programs, got {value!r}")
    return float(value)


def budget_count(value: Any, pool_size: int) -> int:
    """Programs to measure per task: a fraction of the pool (``0 < value <= 1``) or a count
    (the rule of :func:`budget`, which CLI options and configs share)."""
    value = budget(value, "budget")
    if value <= 1:
        return min(pool_size, math.ceil(value * pool_size))
    return min(pool_size, int(value))


def option(rule: Callable[..., Any], parse: Callable[[str], Any] = int, **limits: Any) -> Callable[[str], Any]:
    """An argparse ``type=`` that parses the text with ``parse`` and applies ``rule``: a bad
    value is argparse's one-line usage error, before the command does anything."""

    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        try:
            return rule(value, **limits)
        except TclError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = rule.__name__
    return convert
