"""Formatting evidence for people: rank lists, sizes, durations, stacks."""

from __future__ import annotations

from collections.abc import Iterable

from distmon.wire import Frame

MAX_LISTED = 16


def ranks_text(ranks: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 7, 9, 10]`` as ``0-3, 7, 9-10``; long lists end with a count."""
    ordered = sorted(set(ranks))
    spans: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        spans.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    if len(spans) > MAX_LISTED:
        return ", ".join(spans[:MAX_LISTED]) + f" and {len(spans) - MAX_LISTED} more spans"
    return ", ".join(spans)


def rank_word(ranks: Iterable[int]) -> str:
    ordered = sorted(set(ranks))
    return f"rank {ordered[0]}" if len(ordered) == 1 else f"ranks {ranks_text(ordered)}"


def size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def where(frame: Frame | None) -> str:
    if frame is None:
        return "an unknown place"
    return f"{frame.file}:{frame.line} in {frame.func}"


def stack_lines(frames: list[Frame] | None, depth: int = 4, indent: str = "    ") -> list[str]:
    """The innermost ``depth`` frames, innermost last, with their source lines."""
    if not frames:
        return [f"{indent}(no stack: the rank had not stalled when it last reported)"]
    lines = []
    for f in frames[-depth:]:
        lines.append(f"{indent}{f.file}:{f.line} in {f.func}")
        if f.code:
            lines.append(f"{indent}    {f.code}")
    return lines
