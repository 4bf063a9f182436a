"""Text from a file or a rank, made safe to print: shown, never obeyed.

A dump's group description, an op name, a host name or a recorded alert's summary is
written by whoever wrote the file. Printed as it is, an escape sequence in it sets the
terminal's title, clears the screen or draws a fake verdict. Every printer passes such text
through :func:`visible` (one line) or :func:`visible_lines` (a block): control characters,
escape sequences, bidirectional overrides and invisible formatting characters become
Python-style escapes (``\\x1b``), and a long value is cut with a mark that says how much was
left out. ``--json`` keeps the text as data (JSON escapes it itself).
"""

from __future__ import annotations

import re

MAX_FIELD = 400
"""Characters of one value (a name, a summary) shown on a line: far more than a real one."""
MAX_LINE = 4096
"""Characters of a line made of several values (a headline, a problem with its path)."""
MAX_BLOCK = 64 * 1024
"""Characters of a block (an alert's evidence, a whole report) shown per line at most."""

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ud800-\udfff]")
_CONTROL_BUT_NEWLINE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ud800-\udfff]"
)


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…[{len(text) - limit} more chars]"


def visible(text: str, limit: int = MAX_FIELD) -> str:
    """``text`` on one line, every control character shown as an escape, cut at ``limit``."""
    return _CONTROL.sub(_escape, _cut(text, limit))


def visible_lines(text: str, limit: int = MAX_BLOCK) -> str:
    """``text`` with its newlines kept, every other control character shown as an escape,
    each line cut at ``limit``."""
    if len(text) > limit:
        text = "\n".join(_cut(line, limit) for line in text.split("\n"))
    return _CONTROL_BUT_NEWLINE.sub(_escape, text)
