"""What a paste puts around every line of a log, learnt from the lines ahead: a Markdown quote's ``> ``, a code
block's indent, a viewer's line numbers (a CI's log page, an editor, ``cat -n``), a console's padding to its width.
None of it is the job's."""

from __future__ import annotations

import re
from itertools import pairwise

_QUOTE = re.compile(r"(?:> ?)+")
_LINE_NUMBER = re.compile(r"\s{0,8}(\d{1,7})(?:[ \t]|$)")
"""A viewer's number before a line: ``  12  [rank0]: ...``."""
NUMBERED_SHARE = 0.9
"""How many of the lines ahead, one after another, a viewer's numbers rising by one must start."""


def viewer_numbered(lines: list[str]) -> bool:
    """Nearly every line starts with one more than the line before: a viewer's numbers, no job's own lines."""
    numbers = [int(found.group(1)) if (found := _LINE_NUMBER.match(line)) else None for line in lines]
    rising = sum(1 for a, b in pairwise(numbers) if a is not None and b == a + 1)
    return len(lines) >= 3 and rising >= NUMBERED_SHARE * (len(lines) - 1)


def unnumbered(line: str) -> str:
    found = _LINE_NUMBER.match(line)
    return line[found.end() :] if found else line


def padded(lines: list[str]) -> bool:
    """Most lines end in spaces: a console's copy padded each to its width (not a wrap's piece cut in a run of
    spaces, which a few lines end so)."""
    filled = [line for line in lines if line.strip()]
    return sum(line.endswith("  ") for line in filled) * 2 > len(filled)


def margin(lines: list[str]) -> tuple[bool, str]:
    """Whether the paste is a Markdown quote (most of its lines start with ``>``), and the
    indent every line shares after it."""
    filled = [line for line in lines if line.strip()]
    quoted = sum(line.startswith(">") for line in filled) * 2 > len(filled)
    bare = [unquoted(line, quoted) for line in filled]
    indents = {line[: len(line) - len(line.lstrip())] for line in bare if line.strip()}
    indent = min(indents, key=len) if indents else ""
    return quoted, indent if all(i.startswith(indent) for i in indents) else ""


def unquoted(line: str, quoted: bool) -> str:
    found = _QUOTE.match(line) if quoted else None
    return line[found.end() :] if found else line
