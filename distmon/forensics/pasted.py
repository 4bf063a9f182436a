"""A log as users paste it, put back into the lines the processes wrote.

What a copy adds is taken off each line's start: the line numbers of a pasted file
(``[80746] ``), a CI web view's gutter (``  | ``) and its lone ``--`` between blocks, ``srun``'s
task label (``0: ``), a host and local rank (``[node12:5]:``), Open MPI's and horovodrun's tags
(``[1,5]<stderr>:``, ``[5]<stdout>:``, horovodrun's time before them), Ray's actor (``(WorkerDict pid=63294) ``), vLLM's
worker and its logger (``(VllmWorker rank=3 pid=226) ERROR 06-26 23:10:17 [multiproc_executor.py:527] ``),
a Markdown quote (``> ``) or bold
(``**``), colour codes whose escape the copy lost (``[36m``). What several processes wrote into
one line is cut apart again (``c10::DistBackendErrorterminate called ...``, ``what():
what():  [PG ...``, a second ``[rankN]:``). What a terminal wrapped is joined again: a watchdog
line cut at a fixed width, even in the middle of a word (``OpTy`` / ``pe=BROADCAST``).

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
from itertools import pairwise

from distmon.forensics.watchdog import continues, is_watchdog, whole

MAX_LINE = 64 * 1024
"""Longer lines are cut there: a watchdog line is a few hundred characters."""
MAX_WRAPS = 8
"""Physical lines a terminal may have wrapped one watchdog line into."""
MAX_PIECES = 64
"""Processes' writes one line may be cut into."""

_LABELS = re.compile(
    r"\[\d{1,9}\] (?=\S)"  # a pasted file's line number
    r"| {0,4}\| ?"  # a CI web view's gutter
    r"|\d{1,6}: (?=\S)"  # srun --label
    r"|\[[\w.-]{1,100}:\d{1,6}\]: ?"  # host and local rank
    r"|\[(?:\d{1,6},)?\d{1,9}\]<std(?:out|err)>: ?"  # Open MPI --tag-output, horovodrun
    r"|\[(?!rank\d)[a-z_]{1,20}\d{1,6}\]: ?"  # torchrun --tee's role and local rank
    r"|\(\w{1,100}(?: rank=\d{1,9})? pid=\d{1,9}(?:, ip=[\w.:]{1,64})?\) ?"  # a Ray actor, a vLLM worker
    r"|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}(?=\[)"  # horovodrun's time before its tag
    # vLLM's logger: its level, month-day, time and file
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})? \[?[\w./-]{1,200}:\d{1,6}\] "
    r"|(?:> ?)+(?=\S)"  # a Markdown quote
    r"|\*\*"  # Markdown bold
    r"|\x1b?\[\d{1,3}(?:;\d{1,3}){0,4}m"  # a colour code, its escape lost or not
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
    r"\[rank\d{1,9}\]:|\[[EWIF](?:\d{4} \d\d:| )"
    r"|^\s*(?:what\(\):|terminate called|\[(?:Rank|PG) |Traceback|File \"|frame #|Exception raised from|Root Cause"
    r"|={8}|-{8})"
)
"""What starts a line of its own: a wrapped line's rest starts with none of these."""


def unlabelled(line: str) -> str:
    """The line without what a copy put before it (labels may stack: ``[80746] 0: ...``); a
    launcher's rank tag (Open MPI's, horovodrun's) written as torchrun's ``[rankN]:`` where the
    line carries none."""
    tagged = None
    for _ in range(8):
        found = _LABELS.match(line)
        if found is None or not found.end():
            break
        tag = _TAG.fullmatch(found.group())
        tagged = next(g for g in tag.groups() if g) if tag else tagged
        line = line[found.end() :]
    line = line.removesuffix("**") if "**" in line[-3:] else line
    return f"[rank{tagged}]:{line}" if tagged is not None and not _TORCHRUN.match(line) else line


def pieces(line: str) -> list[str]:
    """The writes of the processes that shared one line, each a line of its own."""
    line = _REPEATED_WHAT.sub(r"\1", line)
    cuts = [m.start() for m in _GLUED.finditer(line, 1)][:MAX_PIECES]
    if not cuts:
        return [line]
    ends = [0, *cuts, len(line)]
    return [line[a:b] for a, b in pairwise(ends) if line[a:b].strip()]


def lines_as_written(raw: Iterable[str]) -> Iterator[str]:
    """Each line of ``raw`` cut at :data:`MAX_LINE`, its copy's labels off, glued writes apart,
    wrapped watchdog lines joined."""
    return _joined(_cleaned(raw))


def _cleaned(raw: Iterable[str]) -> Iterator[str]:
    for line in raw:
        line = line[:MAX_LINE].rstrip("\r\n")
        if _SEPARATOR.fullmatch(line):
            continue
        for piece in pieces(unlabelled(line)):
            yield unlabelled(piece)


def _joined(lines: Iterable[str]) -> Iterator[str]:
    """A watchdog line a terminal wrapped (in the middle of a number or a word, padded with
    spaces) is joined with the lines that carry on from it, up to :data:`MAX_WRAPS`. Every
    piece of a wrapped line but the last fills the terminal's width: a line that follows a
    shorter piece starts a line of its own, unless it is the indented rest of the message (a
    person broke it over lines, each indented under the first)."""
    pending: str | None = None
    width = wraps = 0
    piece = ""
    for line in lines:
        if pending is not None:
            full = wraps == 0 or len(piece) == width
            indented = line[:1].isspace() and continues(line)
            if (full or indented) and wraps < MAX_WRAPS and line.strip() and not _RECORD.search(line):
                pending = (f"{pending.rstrip()} {line.strip()}" if indented else pending + line)[:MAX_LINE]
                wraps, piece = wraps + 1, line
                if whole(pending):
                    yield pending.rstrip()
                    pending = None
                continue
            yield pending.rstrip()
            pending = None
        if is_watchdog(line) and not whole(line):
            pending, width, wraps = line, len(line), 0
        else:
            yield line
    if pending is not None:
        yield pending.rstrip()
