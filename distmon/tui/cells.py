"""Short, fixed-width renderings of numbers: what fits in a table cell."""

from __future__ import annotations

import math

from distmon.guards.text import visible
from distmon.monitor.state import words

BAR_CELLS = " ▏▎▍▌▋▊▉█"


def short_size(n: float | None) -> str:
    """Bytes as ``3.0G``, ``512M``."""
    if n is None or math.isnan(n):
        return "-"
    for unit, scale in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return f"{n:.0f}B"


def short_duration(seconds: float | None) -> str:
    """``0.21s``, ``12s``, ``3m04s``, ``2h05m`` (:func:`~distmon.monitor.state.words.duration`,
    with hundredths under a second: a step time), ``-`` for none."""
    if seconds is None or math.isnan(seconds):
        return "-"
    seconds = max(0.0, seconds)
    return f"{seconds:.2f}s" if seconds < 1 else words.duration(seconds)


def percent(share: float | None) -> str:
    if share is None or math.isnan(share):
        return "-"
    return f"{share * 100:.0f}%"


def bar(fraction: float, cells: int) -> str:
    """A horizontal bar of ``cells`` characters, to an eighth of a cell."""
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * cells * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (BAR_CELLS[part] if part else "")
    return text.ljust(cells, "·")[:cells]


def fit(text: str, width: int, right: bool = False) -> str:
    """Pad or cut ``text`` to exactly ``width`` cells (an ellipsis marks a cut), its control
    characters shown, not obeyed."""
    text = visible(text, width)
    if len(text) > width:
        return text[: width - 1] + "…" if width > 1 else text[:width]
    return text.rjust(width) if right else text.ljust(width)
