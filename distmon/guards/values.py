"""Numbers given by users, checked where they are read: an option or an environment variable
out of range is one line that names it and says what it accepts, never a traceback, and a
training rank never fails because of one (the hook falls back to its default and says so).

Torch-free and dependency-free: both the rank side and the command line read through it.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Mapping


def parse_number(text: str, low: float, high: float, whole: bool = False) -> float:
    """``text`` as a number within [low, high]; ValueError saying what is accepted otherwise."""
    accepted = f"{'a whole number' if whole else 'a number'} from {low:g} to {high:g}"
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not {accepted}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{text} is not {accepted}")
    return value


def option(low: float, high: float, whole: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: argparse prints the mistake in one line with the option's name."""

    def convert(text: str) -> float:
        try:
            return parse_number(text, low, high, whole)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def whole_option(low: int, high: int) -> Callable[[str], int]:
    convert = option(low, high, whole=True)
    return lambda text: int(convert(text))


def from_environment(name: str, default: float, low: float, high: float, env: Mapping[str, str] = os.environ) -> float:
    """The environment variable ``name`` as a number within [low, high]; ``default`` (and one
    line on stderr saying why) when it is set to anything else."""
    text = env.get(name)
    if text is None or not text.strip():
        return default
    try:
        return parse_number(text.strip(), low, high)
    except ValueError as e:
        print(f"distmon: {name}={text}: {e}; using {default:g}", file=sys.stderr)
        return default
