"""A log as users paste it, put back into the lines the processes wrote.

What a terminal or a page did to the whole paste is undone first: colour codes go wherever they
stand (their escape kept or lost: ``[36m``), and the margin every line shares (a Markdown quote's
``> ``, a code block's indent). A terminal's soft wrap is joined again: a line cut at the
terminal's width, its rest on the next line without the line's prefix. The width is learnt from
the lines ahead: the paste's longest line, where lines that long carry on into the next one
(several do, or one does at a width terminals open at).

Then what a copy adds is taken off each line's start: a stamp a logger or a collector put there
(``2024-05-01 12:00:01,234 - INFO - ``, ``[2024-05-01 12:00:01] ``, the kubelet's
``2024-05-01T12:00:01.123456Z stdout F ``), kept as the line's time; the line numbers of a
pasted file (``[80746] ``), a CI web view's gutter (``  | ``) and its lone ``--`` between
blocks, ``srun``'s task label (``0: ``), a host and local rank (``[node12:5]:``), Open MPI's and
horovodrun's tags (``[1,5]<stderr>:``, ``[5]<stdout>:``, horovodrun's time before them), Ray's
actor (``(WorkerDict pid=63294) ``), vLLM's worker and its logger (``(VllmWorker rank=3
pid=226) ERROR 06-26 23:10:17 [multiproc_executor.py:527] ``), Markdown bold (``**``). What
several processes wrote into one line is cut apart again (``c10::DistBackendErrorterminate
called ...``, ``what(): what():  [PG ...``, a second ``[rankN]:``). A watchdog line wrapped at
a width the paste does not show (each piece padded, or broken and indented by a person) is
joined again too, even where the cut fell in the middle of a word (``OpTy`` / ``pe=BROADCAST``).

None of it names a rank, but Open MPI's and horovodrun's tags, which name the MPI rank (the
job's rank where mpirun or horovodrun started the ranks), vLLM's worker label (its rank in
vLLM's world, which torch.distributed's is), and torchrun's ``--tee`` prefix of torch
1.9-2.1 (``[default5]:``, the local rank: the rank where the job ran on one node, as most pasted
logs of it did): a line they tag and torchrun's ``[rankN]:`` does not is written as torchrun
would (``[1,5]<stderr>:x`` is ``[rank5]:x``). Any other label before torchrun's ``[rankN]:`` is
a task, a node or a local rank, which the reader does not take for the global rank.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice, pairwise
from typing import NamedTuple

from distmon.forensics.watchdog import continues, is_watchdog, whole

MAX_LINE = 64 * 1024
"""Longer lines are cut there: a watchdog line is a few hundred characters."""
MAX_WRAPS = 8
"""Physical lines a terminal may have wrapped one watchdog line into."""
MAX_PIECES = 64
"""Processes' writes one line may be cut into."""
WINDOW = 4096
"""Lines read ahead to learn the paste's margin and wrap width."""
WINDOW_CHARS = 1 << 20
"""Characters read ahead at most, whatever the lines."""
MIN_WIDTH = 40
"""The narrowest terminal a paste is taken to be wrapped at."""
TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 160, 200})
"""The widths terminals open at: one line of such a width carrying on into the next is a wrap."""
HEAD = 8
"""Characters of a line's start compared with how the paste's own lines start."""


class Written(NamedTuple):
    """A line as its process wrote it, and the stamp a logger or a collector put before it."""

    text: str
    stamp: str = ""


_COLOURS = re.compile(r"\x1b\[[\d;]{0,32}[mK]|\[\d{1,3}(?:;\d{1,3}){0,4}m(?!\])")
"""Colour codes (and the line erase that follows them), their escape kept or lost by the copy
(``[36m``, ``[0m``): any other escape is the file's, shown, never obeyed."""
_QUOTE = re.compile(r"(?:> ?)+")
_STAMP = re.compile(
    r"\[?(\d{4}-\d\d-\d\d[T _]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d| ?UTC)?)\]?"
    r"(?: (?:stdout|stderr) [FP])?"  # the kubelet's stream and whether the line is whole
    r"(?: ?[-|]? ?\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]? {0,8}[-|:]?)?"  # a logger's level
    r" ?"
)
"""A logger's or a collector's time before a line (``2024-05-01 12:00:01,234 - INFO - ``,
``[2024-05-01 12:00:01] ``, ``2024-05-01T12:00:01.123456Z stdout F ``)."""
_LABELS = re.compile(
    r"\[\d{1,9}\] (?=\S)"  # a pasted file's line number
    r"| {0,4}\| ?"  # a CI web view's gutter
    r"|\d{1,6}: "  # srun --label
    r"|\[[\w.-]{1,100}:\d{1,6}\]: ?"  # host and local rank
    r"|\[(?:\d{1,6},)?\d{1,9}\]<std(?:out|err)>: ?"  # Open MPI --tag-output, horovodrun
    r"|\[(?!rank\d)[a-z_]{1,20}\d{1,6}\]: ?"  # torchrun --tee's role and local rank
    r"|\(\w{1,100}(?: rank=\d{1,9})? pid=\d{1,9}(?:, ip=[\w.:]{1,64})?\) ?"  # a Ray actor, a vLLM worker
    r"|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}(?=\[)"  # horovodrun's time before its tag
    # vLLM's logger: its level, month-day, time and file
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})? \[?[\w./-]{1,200}:\d{1,6}\] "
    r"|(?:> ?)+(?=\S)"  # a Markdown quote
    r"|\*\*"  # Markdown bold
)
"""What a copy puts before a line, each taken off its start."""
_TAG = re.compile(
    r"\[(?:\d{1,6},)?(\d{1,9})\]<std(?:out|err)>: ?|\[[a-z_]{1,20}?(\d{1,6})\]: ?"
    r"|\(\w{1,100} rank=(\d{1,9}) pid=\d{1,9}(?:, ip=[\w.:]{1,64})?\) ?"
)
"""Open MPI's ``--tag-output`` (``[1,5]<stderr>:``) and horovodrun's (``[5]<stdout>:``): the rank;
torchrun's ``--tee`` before torch 2.2 (``[default5]:``, its role and local rank): the rank on one
node."""
_TORCHRUN = re.compile(r"\s*\[rank\d{1,9}\]:")
_SEPARATOR = re.compile(r"\s*--\s*")
"""A CI web view's line between two blocks of a log."""
_GLUED = re.compile(
    r"(?<=\S)(?=terminate called after throwing)"
    r"|(?<=\S)(?=\[rank\d{1,9}\]:)"
    r"|(?<=\S)(?=\(\w{1,100}(?: rank=\d{1,9})? pid=\d{1,9}(?:, ip=[\w.:]{1,64})?\) )"
)
"""Where another process's write starts in the middle of a line."""
_REPEATED_WHAT = re.compile(r"(what\(\): +)(?:what\(\): +)+")
_RECORD = re.compile(
    r"\[rank\d{1,9}\]:|\[[EWIF](?:\d{3,4} \d\d:| )"
    r"|^\s*(?:what\(\):|terminate called|\[(?:Rank|PG) |Traceback|File \"|frame #|Exception raised from|Root Cause"
    r"|={8}|-{8})"
)
"""What starts a line of its own: a wrapped line's rest starts with none of these."""
_STARTS = re.compile(
    _STAMP.pattern + r"|[EWIF]\d{3,4} \d\d:\d\d:\d\d|\[rank\d{1,9}\]:|\[[EWIF](?:\d{3,4} \d\d:| )"
    r"|(?:what\(\):|terminate called|Traceback|frame #|Exception raised from|Root Cause|={8}|-{8})"
    r'| {2}File "|' + _LABELS.pattern
)
"""What a line of its own starts with, where a soft wrap's rest starts with none: a stamp, glog's
own (torchrun's agent), a rank's prefix, what starts a C++ or Python exception, a launcher's
table, a traceback's frame, a label. Not a PG's or a rank's own prefix (``[PG ID 0 ...``,
``[Rank 3]``): torch prints it after glog's, where a wrap may cut."""


def unlabelled(line: str) -> Written:
    """The line without what a copy put before it (labels may stack: ``[80746] 0: ...``), and
    the stamp among them; a launcher's rank tag (Open MPI's, horovodrun's) written as
    torchrun's ``[rankN]:`` where the line carries none."""
    tagged, stamp = None, ""
    for _ in range(8):
        found = _STAMP.match(line) or _LABELS.match(line)
        if found is None or not found.end():
            break
        if found.re is _STAMP:
            stamp = stamp or found.group(1)
        tag = _TAG.fullmatch(found.group())
        tagged = next(g for g in tag.groups() if g) if tag else tagged
        line = line[found.end() :]
    line = line.removesuffix("**") if "**" in line[-3:] else line
    text = f"[rank{tagged}]:{line}" if tagged is not None and not _TORCHRUN.match(line) else line
    return Written(text, stamp)


def split_writes(line: str) -> list[str]:
    """The writes of the processes that shared one line, each a line of its own."""
    line = _REPEATED_WHAT.sub(r"\1", line)
    cuts = [m.start() for m in _GLUED.finditer(line, 1)][:MAX_PIECES]
    if not cuts:
        return [line]
    ends = [0, *cuts, len(line)]
    return [line[a:b] for a, b in pairwise(ends) if line[a:b].strip()]


def lines_as_written(raw: Iterable[str]) -> Iterator[Written]:
    """Each line of ``raw`` cut at :data:`MAX_LINE`, without colour codes, the paste's margin
    and soft wraps, its copy's labels off, glued writes apart, wrapped watchdog lines joined."""
    return _joined(_cleaned(_unwrapped(_plain(line) for line in raw)))


def _plain(line: str) -> str:
    line = line[:MAX_LINE].rstrip("\r\n")
    return _COLOURS.sub("", line) if "[" in line else line


def _unwrapped(lines: Iterator[str]) -> Iterator[str]:
    """The lines without the margin they all share (a quote's ``> ``, a code block's indent),
    the pieces of a line a terminal wrapped joined again, both learnt from the lines ahead."""
    ahead, chars = [], 0
    for line in islice(lines, WINDOW):
        ahead.append(line)
        chars += len(line)
        if chars > WINDOW_CHARS:
            break
    quoted, indent = _margin(ahead)
    rest = (_unquoted(line, quoted).removeprefix(indent) for line in lines)
    ahead = [_unquoted(line, quoted).removeprefix(indent) for line in ahead]
    wrap = _wrap(ahead)
    if wrap is None:
        yield from chain(ahead, rest)
        return
    pending: str | None = None
    last = ""
    for line in chain(ahead, rest):
        if pending is not None and len(last) == wrap.width and wrap.carries_on(line) and len(pending) < MAX_LINE:
            pending, last = pending + line, line
            continue
        if pending is not None:
            yield pending[:MAX_LINE]
        pending = last = line
    if pending is not None:
        yield pending[:MAX_LINE]


def _margin(lines: list[str]) -> tuple[bool, str]:
    """Whether the paste is a Markdown quote (most of its lines start with ``>``), and the
    indent every line shares after it."""
    filled = [line for line in lines if line.strip()]
    quoted = sum(line.startswith(">") for line in filled) * 2 > len(filled)
    unquoted = [_unquoted(line, quoted) for line in filled]
    indents = {line[: len(line) - len(line.lstrip())] for line in unquoted if line.strip()}
    indent = min(indents, key=len) if indents else ""
    return quoted, indent if all(i.startswith(indent) for i in indents) else ""


def _unquoted(line: str, quoted: bool) -> str:
    found = _QUOTE.match(line) if quoted else None
    return line[found.end() :] if found else line


@dataclass(frozen=True)
class _Wrap:
    """A terminal's soft wrap, as the lines ahead show it."""

    width: int
    starts: frozenset[str]
    """How the paste's own lines start: those after a line shorter than the width, which no
    wrap cut (the same NCCL prefix, host name or message on many lines)."""

    def carries_on(self, line: str) -> bool:
        """The line may be the rest of the one before it: it starts as none of the paste's
        own lines start, nor as a line of its own does (:data:`_STARTS`), nor indented (a
        wrap's cut may fall before one space, no more: an indented line is a traceback's code,
        a table's row, a message a person broke)."""
        return (
            bool(line.strip())
            and not line.startswith(("  ", "\t"))
            and line[:HEAD] not in self.starts
            and not _STARTS.match(line)
        )


def _wrap(lines: list[str]) -> _Wrap | None:
    """The width a terminal wrapped the lines at: the longest line's length, where several
    lines of it carry on into the next one, or one does at a width terminals open at."""
    width = max(map(len, lines), default=0)
    if width < MIN_WIDTH:
        return None
    starts = {line[:HEAD] for before, line in pairwise(["", *lines]) if len(before) != width}
    wrap = _Wrap(width, frozenset(starts))
    carried = sum(1 for a, b in pairwise(lines) if len(a) == width and wrap.carries_on(b))
    return wrap if carried >= 2 or (carried and width in TERMINAL_WIDTHS) else None


def _cleaned(raw: Iterable[str]) -> Iterator[Written]:
    for line in raw:
        if _SEPARATOR.fullmatch(line):
            continue
        first = unlabelled(line)
        for piece in split_writes(first.text):
            written = unlabelled(piece)
            yield Written(written.text, written.stamp or first.stamp)


def _joined(lines: Iterable[Written]) -> Iterator[Written]:
    """A watchdog line a terminal wrapped (in the middle of a number or a word, padded with
    spaces) is joined with the lines that carry on from it, up to :data:`MAX_WRAPS`. Every
    piece of a wrapped line but the last fills the terminal's width: a line that follows a
    shorter piece starts a line of its own, unless it is the indented rest of the message (a
    person broke it over lines, each indented under the first)."""
    pending: Written | None = None
    width = wraps = 0
    piece = ""
    for written in lines:
        line = written.text
        if pending is not None:
            full = wraps == 0 or len(piece) == width
            indented = line[:1].isspace() and continues(line)
            if (full or indented) and wraps < MAX_WRAPS and line.strip() and not _RECORD.search(line):
                text = pending.text
                text = (f"{text.rstrip()} {line.strip()}" if indented else text + line)[:MAX_LINE]
                pending = Written(text, pending.stamp)
                wraps, piece = wraps + 1, line
                if whole(text):
                    yield Written(text.rstrip(), pending.stamp)
                    pending = None
                continue
            yield Written(pending.text.rstrip(), pending.stamp)
            pending = None
        if is_watchdog(line) and not whole(line):
            pending, width, wraps = written, len(line), 0
        else:
            yield written
    if pending is not None:
        yield Written(pending.text.rstrip(), pending.stamp)
