"""What a copy does to a log: the characters a page or a terminal changed (typographic quotes, a page source's escapes,
colour codes), a code block's fences, and what a paste puts around every line, learnt from the lines ahead: a
Markdown quote's ``> ``, a code block's indent, a viewer's line numbers (a CI's log page, an editor, ``cat -n``), a
console's padding to its width, a blank line after each (a file whose lines end in two carriage returns, a forum's
double spacing). None of it is the job's."""

from __future__ import annotations

import re
from itertools import pairwise

_COLOURS = re.compile(r"\x1b\[[\d;]{0,32}[mK]|\[\d{1,3}(?:;\d{1,3}){0,4}m(?!\])")
"""Colour codes (and the line erase that follows them), their escape kept or lost by the copy
(``[36m``, ``[0m``): any other escape is the file's, shown, never obeyed."""
_TYPESET = str.maketrans(
    {"\u00a0": " ", "\u202f": " ", "\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'", "\ufeff": None}
)
"""What a web page or a forum makes of plain text (no-break spaces, typographic quotes: ``File “/w/train.py”``),
and an editor's byte-order mark, back to the characters Python and the job wrote."""
_ENTITIES = {"&quot;": '"', "&#39;": "'", "&#x27;": "'", "&lt;": "<", "&gt;": ">", "&amp;": "&"}
_ENTITY = re.compile("|".join(_ENTITIES))
"""A page's source copied for its text: its characters escaped (``File &quot;/w/train.py&quot;``)."""
_FENCE = re.compile(
    r"^\s{0,8}(?:```|~~~)[\w+.-]{0,40}\s*$"
    r"|^\s{0,8}```(?:(?:python3?|py|pytb|bash|sh|shell|console|text|txt|plaintext|log|output)?[ \t]+)?(?=\S)"
    r"|(?<=\S)```\s*$"
)
"""A Markdown code fence on a line of its own (```` ```python ````), or glued to the first or the last line of the
log it fences (a language's name after it only where it is one: ```` ```Process 0 exit ... ```` is the job's)."""
_QUOTE = re.compile(r"(?:> ?)+")
_LINE_NUMBER = re.compile(r"\s{0,8}(\d{1,7})(?:[ \t]|$)")
"""A viewer's number before a line: ``  12  [rank0]: ...``."""
NUMBERED_SHARE = 0.9
"""How many of the lines ahead, one after another, a viewer's numbers rising by one must start."""
MIN_SPACED = 2
"""Lines ahead a blank one must follow at the least: one line alone says nothing of a paste's spacing."""
SPACED_SHARE = 0.9
"""How many of the lines ahead a blank one must follow, for all to be a paste's double spacing."""


def viewer_numbered(lines: list[str]) -> bool:
    """Nearly every line starts with one more than the line before: a viewer's numbers, no job's own lines."""
    numbers = [int(found.group(1)) if (found := _LINE_NUMBER.match(line)) else None for line in lines]
    rising = sum(1 for a, b in pairwise(numbers) if a is not None and b == a + 1)
    return len(lines) >= 3 and rising >= NUMBERED_SHARE * (len(lines) - 1)


def double_spaced(lines: list[str]) -> bool:
    """Nearly every line is followed by a blank one: the paste's spacing, no job's own lines (a traceback, a
    launcher's table have none between their lines)."""
    filled = [i for i, line in enumerate(lines) if line.strip()][:-1]
    spaced = sum(1 for i in filled if not lines[i + 1].strip())
    return len(filled) >= MIN_SPACED and spaced >= SPACED_SHARE * len(filled)


def undoubled(blanks: int) -> int:
    """How many blank lines the log had where the paste shows ``blanks``: one after each line of it."""
    return (blanks - 1) // 2


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


def plain(line: str) -> str:
    """The line as the job wrote it, without what a page, a terminal or an editor changed in its characters."""
    line = line if line.isascii() else line.translate(_TYPESET)
    line = _ENTITY.sub(lambda found: _ENTITIES[found.group()], line) if "&" in line else line
    return _COLOURS.sub("", line) if "[" in line else line


def unfenced(line: str) -> str:
    return _FENCE.sub("", line) if "```" in line or "~~~" in line else line
