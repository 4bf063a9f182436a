"""A log re-pasted the ways people paste logs, each way a pure function of the text: what a
terminal, a logger, a container runtime, a launcher, a web page, a chat box or an impatient person
does to a log between the job that wrote it and the issue it lands in. Shared by the tests
(``tests/unit/test_pasted_shapes.py``) and ``benchmarks/bench_real_logs.py --pasted``.

Each keeps every character the job wrote but :func:`head` and :func:`tail`, which keep 60% of
it, cut wherever that falls (mid-line, as real excerpts are cut)."""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Paste = Callable[[str], str]

_START = datetime(2024, 5, 1, 12, 0, 1, 234567, tzinfo=UTC)
"""The clock of an added stamp: a day and zone the job's own stamps need not share."""


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _per_line(text: str, change: Callable[[int, str], str]) -> str:
    return "".join(change(i, line) + "\n" for i, line in enumerate(_lines(text)))


def wrapped(width: int) -> Paste:
    """A terminal's soft wrap copied as it shows: every line longer than ``width`` cut into
    pieces of ``width`` columns, mid-word, the rest on lines of their own without a prefix."""

    def wrap(text: str) -> str:
        pieces = [line[i : i + width] for line in _lines(text) for i in range(0, max(len(line), 1), width)]
        return "".join(f"{piece}\n" for piece in pieces)

    wrap.__name__ = f"wrap{width}"
    return wrap


def stamped(form: str, records: bool = False) -> Paste:
    """A stamp before every line, a millisecond apart, in the form of a logger or a collector
    (``{t}`` the time, formatted as the form's own strftime pattern after ``|``). A logger's
    (``records``) stamps a record's first line: an indented line is the rest of one (a traceback's
    frame, a message printed over two lines), as Python's ``logging`` writes a record of several."""
    shape, pattern = form.split("|")

    def stamp(text: str) -> str:
        def one(i: int, line: str) -> str:
            if records and line[:1].isspace():
                return line
            at = _START + timedelta(milliseconds=i)
            return shape.format(t=at.strftime(pattern), ms=f"{at.microsecond // 1000:03d}") + line

        return _per_line(text, one)

    return stamp


logging_stamp = stamped("{t},{ms} - INFO - |%Y-%m-%d %H:%M:%S", records=True)
"""Python's ``logging`` with ``%(asctime)s - %(levelname)s - ``."""
bracket_stamp = stamped("[{t}] |%Y-%m-%d %H:%M:%S")
"""A shell's or a wrapper script's ``[date] `` before each line."""
kubectl_stamp = stamped("{t}Z stdout F |%Y-%m-%dT%H:%M:%S.%f")
"""A container's log as the kubelet keeps it (CRI: time, stream, full line)."""
time_stamp = stamped("{t}.{ms} |%H:%M:%S")
"""A logger's time alone, no day (``12:00:01.234 ``)."""


def slurm_label(text: str) -> str:
    """``srun --label``: the task's number before each line of its output (one task: ``0: ``)."""
    return _per_line(text, lambda _, line: f"0: {line}")


def ansi(text: str) -> str:
    """Colour a terminal kept: the line's first word in one colour (a level, a logger's name,
    a stamp), the rest in another, reset at the end, as loguru, rich and Python 3.13's
    tracebacks print."""

    def colour(_: int, line: str) -> str:
        first, space, rest = line.partition(" ")
        return f"\x1b[1;32m{first}\x1b[0m{space}\x1b[31m{rest}\x1b[0m" if line else line

    return _per_line(text, colour)


def crlf(text: str) -> str:
    """A log saved on Windows or copied out of a browser: CR LF line ends."""
    return "".join(f"{line}\r\n" for line in _lines(text))


def quoted(text: str) -> str:
    """A Markdown quote block: ``> `` before every line."""
    return _per_line(text, lambda _, line: f"> {line}")


def indented(text: str) -> str:
    """A Markdown code block indented by four spaces."""
    return _per_line(text, lambda _, line: f"    {line}")


def typeset(text: str) -> str:
    """Text copied off a forum's post outside a code block: a no-break space in each run of spaces, quotes turned
    typographic (``File “/w/train.py”``, ``’``)."""

    def one(_: int, line: str) -> str:
        halves = line.replace("  ", "\u00a0 ").split('"')
        curled = "".join(half + ("\u201c" if i % 2 == 0 else "\u201d") for i, half in enumerate(halves[:-1]))
        return (curled + halves[-1]).replace("'", "\u2019")

    return _per_line(text, one)


def escaped_fenced(text: str) -> str:
    """A page's source copied for its text (``&quot;``, ``&lt;``), the issue's code block fenced with it."""
    for plain, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&#39;")):
        text = text.replace(plain, entity)
    return f"```python\n{text.rstrip(chr(10))}\n```\n"


def numbered_padded(text: str) -> str:
    """A CI's log page copied with its line numbers, each line padded to the console's width."""
    return _per_line(text, lambda i, line: f"{i + 1:>6}  {line}".ljust(160))


def double_spaced(text: str) -> str:
    """A file whose lines end in two carriage returns and a line feed: a blank line after each, as read."""
    return "".join(f"{line}\r\r\n" for line in _lines(text))


_TAGGED = re.compile(
    r"\[rank(\d{1,9})\]:|\[(?:\d{1,6},)?(\d{1,9})\]<std(?:out|err)>:|\[[a-z_]{1,20}?(\d{1,6})\]:"
    r"|\(\w{1,100} rank=(\d{1,9}) pid=|\[Rank (\d{1,9})\]"
)
"""A line's own rank, as torchrun, Open MPI, horovodrun, torchrun's ``--tee``, vLLM or old torch
tags it."""


def _records(lines: list[str]) -> list[tuple[str | None, list[str]]]:
    """The log's records: a tagged line with the indented lines under it (its rank's), or one
    untagged line (the launcher's, or of no rank)."""
    records: list[tuple[str | None, list[str]]] = []
    for line in lines:
        tag = _TAGGED.search(line)
        if tag:
            records.append((next(g for g in tag.groups() if g is not None), [line]))
        elif records and records[-1][0] is not None and line[:1].isspace():
            records[-1][1].append(line)
        else:
            records.append((None, [line]))
    return records


def interleaved(text: str) -> str:
    """The ranks' writes reaching the terminal in another order: between two untagged lines, the
    tagged records of different ranks shuffled, each rank's own in its order, the same order for
    the same text every time."""
    rng = random.Random(zlib.crc32(text.encode()))
    out: list[str] = []
    run: dict[str, list[list[str]]] = {}

    def flush() -> None:
        while run:
            rank = rng.choice(sorted(run))
            out.extend(run[rank].pop(0))
            if not run[rank]:
                del run[rank]

    for rank, lines in _records(_lines(text)):
        if rank is None:
            flush()
            out.extend(lines)
        else:
            run.setdefault(rank, []).append(lines)
    flush()
    return "".join(f"{line}\n" for line in out)


SHARE = 0.6
"""What an excerpt keeps of the log."""


def head(text: str) -> str:
    """The first 60% of the log, cut wherever that falls."""
    return text[: int(len(text) * SHARE)]


def tail(text: str) -> str:
    """The last 60% of the log, starting wherever that falls."""
    return text[len(text) - int(len(text) * SHARE) :]


def composed(*pastes: Paste) -> Paste:
    """Several pastes one after the other, the first nearest the job."""

    def paste(text: str) -> str:
        for one in pastes:
            text = one(text)
        return text

    return paste


KEEPING: dict[str, Paste] = {
    "wrap80": wrapped(80),
    "wrap120": wrapped(120),
    "logging stamp": logging_stamp,
    "bracket stamp": bracket_stamp,
    "kubectl stamp": kubectl_stamp,
    "srun label": slurm_label,
    "ansi colour": ansi,
    "crlf": crlf,
    "quote": quoted,
    "indent 4": indented,
    "interleaved": interleaved,
    "time stamp": time_stamp,
    "typeset": typeset,
    "escaped+fenced": escaped_fenced,
    "numbered+padded": numbered_padded,
    "double spaced": double_spaced,
    "kubectl+wrap120": composed(interleaved, kubectl_stamp, wrapped(120)),
    "srun+wrap80+quote": composed(slurm_label, wrapped(80), quoted),
}
"""Pastes that keep every line the job wrote: the verdict must not change. The last two as they
come together: a pod's log, its ranks' lines in another order, read in a terminal; srun's
labelled output wrapped by a terminal and quoted in an issue."""
CUTTING: dict[str, Paste] = {"first 60%": head, "last 60%": tail}
"""Excerpts: the proving lines may be gone, but a culprit named must still be one."""
PASTES: dict[str, Paste] = {**KEEPING, **CUTTING}
