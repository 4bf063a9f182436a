"""A log as users paste it, put back into the lines the processes wrote.

What a terminal or a page did to the whole paste is undone first: colour codes go wherever they
stand (their escape kept or lost: ``[36m``), and the margin every line shares (a Markdown quote's
``> ``, a code block's indent). A terminal's soft wrap is joined again: a line cut at the
terminal's width, its rest on the next line without the line's prefix. The width is learnt from
the lines ahead: the paste's longest line, where lines that long carry on into the next one
(several do, or one does at a width terminals open at).

Then a Markdown code fence glued to a line is taken off, and what a copy adds off each line's
start: a stamp a logger or a collector put there
(``2024-05-01 12:00:01,234 - INFO - ``, ``[2024-05-01 12:00:01] ``, the kubelet's
``2024-05-01T12:00:01.123456Z stdout F ``), kept as the line's time; the line numbers of a
pasted file (``[80746] ``, rising by one line after line), a CI web view's gutter (``  | ``) and
its lone ``--`` between blocks, ``srun``'s task label (``0: ``), a runner's stream (``accelerate
test``'s ``stderr: ``), pdsh's host (``worker-3: ``, as DeepSpeed's multi-node launcher shows each
node's lines), journald's time, host and process
(``May 01 12:00:01 node1 python3[4321]: ``), a host and local rank (``[node12:5]:``), Open MPI's
and horovodrun's tags (``[1,5]<stderr>:``, ``[5]<stdout>:``, horovodrun's time before them; Open
MPI's again before each fragment of a line a process wrote in pieces), a collector's columns
(Determined's ``<info> [2024-05-01 12:00:01] 0a1b2c3d || ``, a pod's ``master.0 -- ``), xla_dist's
worker (``10.0.0.2 [3] ``, a host's index, no rank),
MPICH's and Intel MPI's (``[5] ``, ``mpiexec -l``, as horovodrun runs them), Ray's actor or
process (``(WorkerDict pid=63294) ``, ``(pid=63294, ip=10.0.0.2) ``, ``(raylet) ``) and its
``[repeated 3x across cluster]`` after a line, SkyPilot's node (``(worker1, rank=1, pid=2101,
ip=10.0.0.2) ``), ``kubectl logs --prefix``'s pod (``[pod/job-worker-0/pytorch] ``), stern's pod and
container (``job-worker-0 pytorch ``), vLLM's
worker and its logger (``(VllmWorker rank=3 pid=226) ERROR 06-26 23:10:17
[multiproc_executor.py:527] ``), a logger's name, place or level after its time (hydra's
``[name][INFO] - ``, loguru's ``| ERROR    | module:function:42 - ``, DeepSpeed's ``[INFO]
[launch.py:321:sigkill_handler] ``), a program's own rank label (Lightning's ``[rank: 1] ``,
``[rank1] ``, ``[RANK 1] ``, ``rank1: ``), pytest's ``E`` and the failing line's indent before
the lines of a failure it reports (where most lines have it), Markdown bold (``**``). What
several processes wrote into one line is cut apart again (``c10::DistBackendErrorterminate
called ...``, ``what(): what():  [PG ...``, a second ``[rankN]:``). A watchdog line wrapped at
a width the paste does not show (each piece padded, or broken and indented by a person) is
joined again too, even where the cut fell in the middle of a word (``OpTy`` / ``pe=BROADCAST``).

None of it names a rank, but Open MPI's, horovodrun's, MPICH's and Intel MPI's tags, which name
the MPI rank (the job's rank where mpirun or horovodrun started the ranks), vLLM's worker label
(its rank in vLLM's world, which torch.distributed's is), a program's own rank label, and
torchrun's ``--tee`` prefix of torch 1.9-2.1 (``[default5]:``, the local rank: the rank where the
job ran on one node, as most pasted logs of it did), and Ray's worker label where Ray Train's list of
its workers at start gives its pid a rank: a line they tag and torchrun's ``[rankN]:``
does not is written as torchrun would (``[1,5]<stderr>:x`` is ``[rank5]:x``). MPICH's ``[5] `` is
told from a pasted file's line numbers by the lines ahead: line numbers rise by one from each
line to the next, ranks' labels repeat; srun's ``5: `` is rank 5 where the lines ahead show srun
started a task a rank (two tasks' lines or more carry their own number in a rank's prefix or the
watchdog's ``[Rank N]``, none another). Any other label before torchrun's ``[rankN]:`` is a task,
a node or a local rank (SkyPilot's ``rank=1`` is its node's), which the reader does not take for
the global rank.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice, pairwise, repeat
from typing import NamedTuple

from distmon.forensics.copied import (
    double_spaced,
    margin,
    padded,
    plain,
    undoubled,
    unfenced,
    unnumbered,
    unquoted,
    viewer_numbered,
)
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


_CUT_FRAME = re.compile(r'\s{0,8}[^"\s]{1,1000}", line \d{1,9}, in \S')
"""A frame's line whose start a paste cut (``..../site-packages/x.py", line 118, in root_device``): the paste
begins inside a traceback."""
_LABELLED_CODE = re.compile(r"(\S{1,40}[\]>:]) {2,}\S")
"""A line of code under a frame after its process's label (``[rank0]:     return func(x)``)."""


class Written(NamedTuple):
    """A line as its process wrote it, and the stamp a logger or a collector put before it."""

    text: str
    stamp: str = ""
    host: str = ""
    """The node pdsh says the line came from (``node2: ``), where it put its label."""
    repeated: int = 0
    """How many more times Ray's log deduplication says processes wrote the line (``[repeated 7x across
    cluster]``): within seconds, the same line, numbers aside."""


_PYTEST = re.compile(r"E( {1,64})\S|E\s*$")
"""pytest's mark before each line of a failure it reports (``E       RuntimeError: ...``): ``E``,
then the failing line's indent, then the line."""
_STAMP = re.compile(
    r"\[?((?:\d{4}[-/]\d\d[-/]\d\d[T _]|\d\d/\d\d/\d{4} )?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d| ?UTC)?)\]?"
    r"(?::(?= ))?"
    r"(?: (?:stdout|stderr) [FP])?"  # the kubelet's stream and whether the line is whole
    r"(?:\[[\w.<>-]{1,100}\](?=\[))?"  # hydra's logger name: ``[name][LEVEL]``
    r"(?: ?[-|]? ?\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]? {0,8}[-|:]?)?"  # a logger's level
    r"(?: ?[\w.<>-]{1,100}:[\w.<>-]{1,100}:\d{1,6} -| ?\[[\w.-]{1,100}:\d{1,6}:\w{1,100}\])?"  # loguru's, DeepSpeed's
    r"[ \t]?"
)
"""A logger's or a collector's time before a line (``2024-05-01 12:00:01,234 - INFO - ``,
``[2024-05-01 12:00:01] ``, ``2024-05-01T12:00:01.123456Z stdout F ``, a collector's
``2024-05-01T12:00:01.123Z: ``), and what a logger puts
after it: its name (hydra's ``[2024-05-01 12:00:01,234][__main__][INFO] - ``), its level, its
place (loguru's ``| ERROR    | train:main:42 - ``, DeepSpeed's ``[INFO] [launch.py:321:main] ``)."""
_PDSH_HOST = re.compile(
    r"(?:\d{1,3}(?:\.\d{1,3}){3}|[a-z][a-z0-9-]{0,62}\d[a-z0-9-]{0,62}(?:\.[a-z0-9-]{1,63}){0,6}): "
)
"""pdsh's label: the host the line came from (an address, or a name with a number in it)."""
_POD = re.compile(r"[a-z][a-z0-9.-]{0,200}-\d{1,5}(?:-[a-z0-9]{5})? [a-z][a-z0-9-]{0,62} ")
"""stern's label: a pod (by its index) and its container. Two words that a wrap's rest may start with too
(``...mpijob-wo`` / ``rker-1 exited on signal 9``)."""
_LABELS = re.compile(
    r"\[\d{1,9}\] (?=\S)(?!is setting up NCCL|Signal: )"  # a pasted file's line number (not torch's "[3] is"
    # "setting up", nor Open MPI's signal handler's process)
    r"| {0,4}\| ?"  # a CI web view's gutter
    r"|\d{1,6}: "  # srun --label
    r"|(?:stdout|stderr): "  # a runner's stream (``accelerate test``'s ``stderr: ``)
    r"|\[[\w.-]{1,100}:\d{1,6}\]: ?"  # host and local rank
    r"|\[(?:\d{1,6},)?\d{1,9}\]<std(?:out|err)>: ?"  # Open MPI --tag-output, horovodrun
    r"|\[\d{1,6},mpirank:\d{1,9},[\w.-]{1,100}\]<std(?:out|err)>: ?"  # SageMaker's MPI
    r"|\[(?!rank\d)[a-z_]{1,20}\d{1,6}\]: ?"  # torchrun --tee's role and local rank
    r"|\[rank: ?\d{1,6}\] |\[rank\d{1,6}\] (?=\S)|\[RANK \d{1,6}\] |[Rr]ank ?\d{1,6}: "  # a program's rank label
    r"|\((?:\w{1,100} )?(?:rank=\d{1,9} )?pid=\d{1,9}(?:, ip=[\w.:]{1,64})?\) ?"  # a Ray actor, a vLLM worker
    r"|\(\w{1,40}, rank=\d{1,6}, pid=\d{1,9}(?:, ip=[\w.:]{1,64})?\) ?"  # SkyPilot's node
    r"|\((?:raylet|gcs_server|autoscaler|monitor|dashboard)\b[^)]{0,100}\) "  # Ray's own processes
    r"|\[pod/[\w.-]{1,253}/[\w.-]{1,63}\] "  # kubectl logs --prefix
    r"|"
    + _POD.pattern  # stern's pod (by index), container
    + r"|\[(?!rank\d)[a-z][\w.-]{0,62}\d[\w.-]{0,62}\] "  # a node's name, put by whoever gathered its lines
    r"|<\w{0,10}> {1,12}|[\w-]{1,64} \|\| "  # a collector's level column, a container's id and its column
    r"|[a-z][\w-]{0,40}\.\d{1,4} -- "  # a pod's role and replica (``master.0 -- ``)
    r"|[a-z][\w.-]{0,100}[-_]\d{1,4} {1,40}\| "  # docker compose's container, padded (``trainer-1  | ``)
    r"|(?:\d{1,3}\.){3}\d{1,3} \[\d{1,6}\] "  # xla_dist's worker: its host's address and index, no rank
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,200} [\w.@/-]{1,100}(?:\[\d{1,9}\])?: "  # journald
    r"|"
    + _PDSH_HOST.pattern  # pdsh
    + r"|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}(?=\[)"  # horovodrun's time before its tag
    # vLLM's logger: its level, month-day, time and file
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})? \[?[\w./-]{1,200}:\d{1,6}\] "
    r"|(?:> ?)+(?=\S)"  # a Markdown quote
    r"|\*\*"  # Markdown bold
)
"""What a copy puts before a line, each taken off its start."""
_TAG = re.compile(
    r"\[(?:\d{1,6},)?(\d{1,9})\]<std(?:out|err)>: ?|\[[a-z_]{1,20}?(\d{1,6})\]: ?"
    r"|\[\d{1,6},mpirank:(\d{1,9}),[\w.-]{1,100}\]<std(?:out|err)>: ?"
    r"|\(\w{1,100} rank=(\d{1,9}) pid=\d{1,9}(?:, ip=[\w.:]{1,64})?\) ?"
    r"|\[rank: ?(\d{1,6})\] |\[rank(\d{1,6})\] |\[RANK (\d{1,6})\] |[Rr]ank ?(\d{1,6}): "
)
"""Open MPI's ``--tag-output`` (``[1,5]<stderr>:``, SageMaker's ``[1,mpirank:5,algo-1]<stderr>:``) and
horovodrun's (``[5]<stdout>:``): the rank;
torchrun's ``--tee`` before torch 2.2 (``[default5]:``, its role and local rank): the rank on one
node; vLLM's worker's rank; a program's own rank label (Lightning's ``[rank: 5] ``)."""
_MPI_TAG = re.compile(r"\[(\d{1,6})\] ")
"""MPICH's and Intel MPI's ``mpiexec -l`` (``[5] ``): the rank, where the paste's lines show it is
not a pasted file's line numbers (:func:`_mpi_labelled`)."""
_NUMBERED = re.compile(r"\[(\d{1,9})\] ")
_HANDLER = re.compile(
    r"\*\*\* (?:Process received signal|End of error message) \*\*\*|Signal(?: code)?: |Failing at |\[ ?\d{1,3}\] "
)
"""Open MPI's signal handler's lines, which its ``[PID] `` labels: a process's id, not a rank."""
_GLOBAL_RANK = re.compile(r"^\[rank(\d{1,9})\]:|\[Rank (\d{1,9})\]|default_pg\) ?Rank (\d{1,9})\]")
"""A line's global rank: torchrun's prefix, the watchdog's ``[Rank N]`` of old torch (not a
group's ``[PG 3 Rank N]``), the default group's rank."""
_REPEATED = re.compile(r"\s{0,8}\[repeated (\d{1,9})x across cluster\]\s*$")
"""Ray's log deduplication: the same line from as many other processes, folded into this one."""
_TASK = re.compile(r"\d{1,6}: ")
"""srun's ``--label``."""
_LISTED = re.compile(r"\[(?!rank\d{1,9}\]:)[^\]\s]")
"""How a rank's list of tensors starts under Horovod's ``Missing ranks:`` (``2: [allreduce.a, ...]``)."""
_STALL_LIST = re.compile(r"(?:Missing|Stalled) ranks:\s*$|^\s*(?:\[rank\d{1,9}\]:)?\d{1,9}!?: \[")
"""Horovod's stall inspector's header of its list, or a rank's line in it: the next line may be
one more."""
_TORCHRUN = re.compile(r"\s*\[rank\d{1,9}\]:")
_SEPARATOR = re.compile(r"\s*--\s*")
"""A CI web view's line between two blocks of a log."""
_GLUED = re.compile(
    r"(?<=\S)(?=terminate called after throwing|Traceback \(most recent call last\):"
    r"|\[rank\d{1,9}\]:|\[default\d{1,9}\]:"
    r"|\(\w{1,100}(?: rank=\d{1,9})? pid=\d{1,9}(?:, ip=[\w.:]{1,64})?\) )"
    r"|(?<=\S    )(?= {0,200}\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)"
)
"""Where another process's write starts in the middle of a line (a progress bar ends with no newline):
its rank's prefix, torchrun's (``[rank5]:``, ``--tee``'s ``[default5]:`` of torch 1.9-2.1) or Ray's; or where
the next record starts, its time first, after the spaces a terminal padded a line with to its width (a copy
that joined its lines)."""
_GLUED_WORDS = ("terminate called", "Traceback", "[rank", "[default", "pid=", "    2")
"""Words a line holds wherever :data:`_GLUED` finds a write in it (most lines hold none)."""
_REPEATED_WHAT = re.compile(r"(what\(\): +)(?:what\(\): +)+")
_RECORD = re.compile(
    r"\[rank\d{1,9}\]:|\[[EWIF](?:\d{3,4} \d\d:| )"
    r"|\b[EWIF]\d{4} \d\d:\d\d:\d\d\.\d{1,9} {1,8}\d{1,9} \S{1,300}:\d{1,6}\] "
    r"|^\s*(?:what\(\):|terminate called|\[(?:Rank|PG) |Traceback|File \"|frame #|Exception raised from|Root Cause"
    r"|={8}|-{8}|nccl[A-Z][a-zA-Z]{2,40}: |Last error:)"
)
"""What starts a line of its own: a wrapped line's rest starts with none of these (nor NCCL's error's own lines under
it, ``ncclInvalidUsage: ...``), nor holds glog's header (torchrun's agent's lines, after a logger's stamp too)."""
_STARTS = re.compile(
    _STAMP.pattern + r"|[EWIF]\d{3,4} \d\d:\d\d:\d\d|\[rank\d{1,9}\]:|\[[EWIF](?:\d{3,4} \d\d:| )"
    r"|(?:what\(\):|terminate called|Traceback|frame #|Exception raised from|Root Cause|={8}|-{8}|\[\d{1,9}\]:\s*$)"
    r'| {2}File "| ?\d{1,4} {1,2}(?:/\S|0x[0-9a-f]{8})|' + _LABELS.pattern
)
"""What a line of its own starts with, where a soft wrap's rest starts with none: a stamp, glog's
own (torchrun's agent), a rank's prefix, what starts a C++ or Python exception, a launcher's
table (an entry of torchrun's: ``[4]:``), a traceback's frame (Python's, UCX's native one), a
label. Not a PG's or a rank's own prefix (``[PG ID 0 ...``, ``[Rank 3]``): torch prints it after
glog's, where a wrap may cut."""


class Labels(NamedTuple):
    """What the lines ahead say of the labels before a paste's lines."""

    mpi: bool = False
    """``[N] `` is MPICH's or Intel MPI's rank label, not a pasted file's line number."""
    pytest: re.Pattern[str] | None = None
    """pytest's ``E`` and the indent it puts before every line of the failure it reports."""
    tasks: bool = False
    """srun started a task a rank: its task label is the rank."""
    node: int = 0
    """The first global rank of the node whose torchrun ``--tee`` labels the lines (``[default3]:``,
    its local rank 3), where the lines' own ranks say it (``[Rank 11]`` under ``[default3]:``)."""
    workers: tuple[tuple[int, int], ...] = ()
    """Ray Train's workers as it lists them at start (``pid=40103) world_rank=3``): a pid and its rank, each."""


ALONE = Labels()
"""What a line alone says of its labels: only the launchers' tags name ranks."""


def unlabelled(line: str, labels: Labels = ALONE, listing: bool = False) -> Written:
    """The line without what a copy put before it (labels may stack: ``[80746] 0: ...``; pytest's
    mark where ``labels`` has it), and the stamp among them; a launcher's rank tag (Open MPI's,
    horovodrun's; MPICH's ``[5] ``, srun's ``5: `` where ``labels`` says they are ranks) written as
    torchrun's ``[rankN]:`` where the line carries none. ``listing``: the line may be one of
    Horovod's stall inspector's list under its header (``2: [allreduce.a, ...]``), whose rank is the
    line's own, not srun's label."""
    return _unlabelled(line, labels, listing)[0]


def _unlabelled(line: str, labels: Labels, listing: bool = False) -> tuple[Written, int | None]:
    """:func:`unlabelled`, and srun's task label where the line has one."""
    tagged, stamp, task, host = None, "", None, ""
    for _ in range(8):
        found = _STAMP.match(line) or _LABELS.match(line) or (labels.pytest.match(line) if labels.pytest else None)
        numbered = found is not None and _TASK.fullmatch(found.group()) is not None
        if found is None or not found.end() or (numbered and (tagged is not None or task is not None)):
            break  # srun's label stands first, once: after it or a rank's tag, ``1: [...]`` is the line's own
        if numbered and listing and _LISTED.match(line, found.end()) and not _LABELS.match(line, found.end()):
            break  # Horovod's ``2: [tensor, ...]`` under its ``Missing ranks:``
        if found.re is _STAMP:
            stamp = stamp or found.group(1)
        elif not host and _PDSH_HOST.fullmatch(found.group()):
            host = found.group()[:-2]
        elif task is None and _TASK.fullmatch(found.group()):
            task = found.group()[:-2]
        tag = _TAG.fullmatch(found.group()) or (_MPI_TAG.fullmatch(found.group()) if labels.mpi else None)
        if tag is not None:
            number = next(g for g in tag.groups() if g)
            tagged = str(int(number) + labels.node) if tag.re is _TAG and tag.group(2) else number
        elif labels.workers and (actor := _RAY_PID.fullmatch(found.group())) is not None:
            tagged = next((str(rank) for pid, rank in labels.workers if pid == int(actor.group(1))), tagged)
        line = line[found.end() :]
        if tag is not None and "<std" in found.group() and found.group().rstrip() in line:
            line = line.replace(found.group().rstrip(), "")  # Open MPI tags each write: a line's fragments
    line = line.removesuffix("**") if "**" in line[-3:] else line
    repeated = _REPEATED.search(line) if "across cluster" in line else None
    line = line[: repeated.start()] if repeated else line
    tagged = task if tagged is None and labels.tasks else tagged
    text = f"[rank{tagged}]:{line}" if tagged is not None and not _TORCHRUN.match(line) else line
    others = int(repeated.group(1)) if repeated else 0
    return Written(text, stamp, host, others), int(task) if task is not None else None


def split_writes(line: str) -> list[str]:
    """The writes of the processes that shared one line, each a line of its own."""
    line = _REPEATED_WHAT.sub(r"\1", line) if "what()" in line else line
    if not any(word in line for word in _GLUED_WORDS):
        return [line]
    cuts = [m.start() for m in islice(_GLUED.finditer(line, 1), MAX_PIECES)]
    if not cuts:
        return [line]
    ends = [0, *cuts, len(line)]
    pieces = [line[a:b] for a, b in pairwise(ends) if line[a:b].strip()]
    if len(pieces) > 1 and _TORCHRUN.fullmatch(pieces[0]):
        pieces[:2] = [pieces[0] + pieces[1]]  # the line's own rank label (a tag made one), not a write
    return pieces


def lines_as_written(raw: Iterable[str]) -> Iterator[Written]:
    """Each line of ``raw`` cut at :data:`MAX_LINE`, without what a copy did to it (:mod:`~distmon.forensics.copied`)
    and soft wraps, its copy's labels off, glued writes apart, wrapped watchdog lines joined."""
    lines = (plain(line[:MAX_LINE].rstrip("\r\n")) for line in raw)
    return _begun(_joined(_cleaned(_unwrapped(_unnumbered(_undoubled(lines))))))


def _begun(lines: Iterator[Written]) -> Iterator[Written]:
    """The paste's first line as Python wrote it where the paste begins inside a frame's line, its start cut
    (``..../site-packages/x.py", line 118, in root_device``): the traceback's frame, under the label of the line
    of code below it, which the cut took from it."""
    for written in lines:
        if written.text.strip():
            if _CUT_FRAME.match(written.text) is None:
                yield written
                break
            below = next(lines, None)
            label = _LABELLED_CODE.match(below.text) if below is not None else None
            yield written._replace(text=f'{label.group(1) if label else ""}  File "{written.text.lstrip()}')
            yield from [below] if below is not None else []
            break
        yield written
    yield from lines


def _undoubled(lines: Iterator[str]) -> Iterator[str]:
    """The lines without the blank one a paste put after each (:func:`~distmon.forensics.copied.double_spaced`)."""
    ahead = _ahead(lines)
    if not double_spaced(ahead):
        yield from chain(ahead, lines)
        return
    blanks = 0
    for line in chain(ahead, lines):
        if not line.strip():
            blanks += 1
            continue
        yield from repeat("", undoubled(blanks))
        yield line
        blanks = 0


def _unnumbered(lines: Iterator[str]) -> Iterator[str]:
    """The lines without the numbers a viewer put before each (:func:`~distmon.forensics.copied.viewer_numbered`)."""
    ahead = _ahead(lines)
    yield from (unnumbered(line) for line in chain(ahead, lines)) if viewer_numbered(ahead) else chain(ahead, lines)


def _ahead(lines: Iterator[str]) -> list[str]:
    """The next :data:`WINDOW` lines, within :data:`WINDOW_CHARS` characters."""
    ahead, chars = [], 0
    for line in islice(lines, WINDOW):
        ahead.append(line)
        chars += len(line)
        if chars > WINDOW_CHARS:
            break
    return ahead


def _unwrapped(lines: Iterator[str]) -> Iterator[str]:
    """The lines without the margin they all share (a quote's ``> ``, a code block's indent) and a console's padding,
    the pieces of a line a terminal wrapped joined again, all learnt from the lines ahead."""
    ahead = _ahead(lines)
    quoted, indent = margin(ahead)
    end = str.rstrip if padded(ahead) else str
    rest = (end(unquoted(line, quoted).removeprefix(indent)) for line in lines)
    ahead = [end(unquoted(line, quoted).removeprefix(indent)) for line in ahead]
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


@dataclass(frozen=True)
class _Wrap:
    """A terminal's soft wrap, as the lines ahead show it."""

    width: int
    starts: frozenset[str]
    """How the paste's own lines start: those after a line shorter than the width, which no
    wrap cut (the same NCCL prefix, host name or message on many lines)."""
    numbered: bool = False
    """Some of the paste's own lines start with ``[N] `` (a pasted file's line numbers, MPICH's
    label): where none does, a wrap's rest may start so (``... ncclUniqueId from `` / ``[0] via``)."""

    def carries_on(self, line: str) -> bool:
        """The line may be the rest of the one before it: it starts as none of the paste's
        own lines start, nor as a line of its own does (:data:`_STARTS`), nor indented (a
        wrap's cut may fall before one space, no more: an indented line is a traceback's code,
        a table's row, a message a person broke), nor is a table's row (columns apart)."""
        own = _STARTS.match(line) is not None and (self.numbered or not _numbered_only(line)) and not _pod_only(line)
        table = len(_COLUMNS.findall(line)) > 1  # a row of a table whose rows are as wide (kubectl's)
        return (
            bool(line.strip())
            and not line.startswith(("  ", "\t"))
            and line[:HEAD] not in self.starts
            and not own
            and not table
        )


_COLUMNS = re.compile(r"\S {3,}(?=\S)")
"""A gap between a table's columns."""


def _pod_only(line: str) -> bool:
    """The line starts as a line of its own only by what may be stern's label: a paste that stern labelled
    shows its pods' names on the lines no wrap cut (:attr:`_Wrap.starts`)."""
    found = _POD.match(line)
    return found is not None and not _STARTS.match(line, found.end())


def _numbered_only(line: str) -> bool:
    """The line starts as a line of its own only by its ``[N] ``."""
    found = _NUMBERED.match(line)
    return found is not None and not _STARTS.match(line, found.end())


def _wrap(lines: list[str]) -> _Wrap | None:
    """The width a terminal wrapped the lines at: the longest line's length, where several
    lines of it carry on into the next one, or one does at a width terminals open at."""
    width = max(map(len, lines), default=0)
    if width < MIN_WIDTH:
        return None
    own = [line for before, line in pairwise(["", *lines]) if len(before) != width]
    numbered = any(_NUMBERED.match(line) for line in own)
    wrap = _Wrap(width, frozenset(line[:HEAD] for line in own), numbered)
    carried = sum(1 for a, b in pairwise(lines) if len(a) == width and wrap.carries_on(b))
    return wrap if carried >= 2 or (carried and width in TERMINAL_WIDTHS) else None


def _cleaned(raw: Iterator[str]) -> Iterator[Written]:
    ahead = [unfenced(line) for line in _ahead(raw)]
    labels = Labels(_mpi_labelled(ahead), _pytest_mark(ahead))
    labels = labels._replace(tasks=_task_a_rank(ahead, labels), node=_tee_node(ahead), workers=_ray_workers(ahead))
    listing = False
    for line in chain(ahead, (unfenced(line) for line in raw)):
        if _SEPARATOR.fullmatch(line):
            continue
        first = unlabelled(line, labels, listing)
        pieces = split_writes(first.text)
        for i, piece in enumerate(pieces, 1):
            written = unlabelled(piece, labels, listing)
            listing = bool(_STALL_LIST.search(written.text))
            repeated = first.repeated if i == len(pieces) else 0  # Ray's count ends the line: its last write's
            yield Written(written.text, written.stamp or first.stamp, written.host or first.host, repeated)


def _task_a_rank(lines: list[str], labels: Labels) -> bool:
    """Whether srun started a task a rank (no torchrun under it): the lines that carry both srun's
    task label and a global rank (a rank's prefix, the watchdog's ``[Rank N]`` of old torch, its
    default group's rank) all name the same number, for two tasks at least (one task's lines
    cannot tell a task a rank from one task running every rank)."""
    agree: set[int] = set()
    for line in lines:
        written, task = _unlabelled(line, labels)
        rank = _GLOBAL_RANK.search(written.text) if task is not None else None
        if rank is not None:
            number = int(next(g for g in rank.groups() if g))
            if number != task:
                return False
            agree.add(number)
    return len(agree) > 1


def _ray_workers(lines: list[str]) -> tuple[tuple[int, int], ...]:
    """Ray Train's list of its workers (``- (ip=10.0.0.1, pid=40103) world_rank=3, local_rank=3, node_rank=0``):
    each worker's pid and rank, where no pid is listed twice with two ranks (two runs' lists)."""
    listed = {
        (int(found.group(1)), int(found.group(2)))
        for line in lines
        if "world_rank=" in line and (found := _RAY_WORKER.search(line))
    }
    pids = [pid for pid, _ in listed]
    return tuple(sorted(listed)) if len(pids) == len(set(pids)) else ()


_RAY_WORKER = re.compile(r"\bpid=(\d{1,12})\) world_rank=(\d{1,9}),")
_RAY_PID = re.compile(r"\((?:\w{1,100} )?pid=(\d{1,12})(?:, ip=[\w.:]{1,64})?\) ?")
"""A Ray worker's label (``(RayTrainWorker pid=40103, ip=10.0.0.1) ``): the process, whose rank Ray Train's list
says."""


_TEE = re.compile(r"\[[a-z_]{1,20}?(\d{1,6})\]: ?")
"""torchrun's ``--tee`` label: its role and the worker's local rank."""
_OWN_RANK = re.compile(r"\[Rank (\d{1,9})\]|default_pg\) ?Rank (\d{1,9})\]")
_AGENTS_RANKS = re.compile(r"^\s{0,8}rank\s{0,8}: (\d{1,9}) \(local_rank: (\d{1,9})\)|\bglobal_ranks=\[(\d{1,9})")
"""What torchrun's agent says of its own node's workers: its failure table's rows (``rank : 11 (local_rank: 3)``)
and its rendezvous's ``global_ranks=[8, ...]``, the global rank of its local rank 0."""


def _tee_node(lines: list[str]) -> int:
    """The first global rank of the node whose ``--tee`` labels the lines: where every line carrying
    both a label and its global rank (the watchdog's ``[Rank N]``, its default group's), and torchrun's agent's
    word on its workers, set them the same distance apart; else 0 (one node, or the lines do not say)."""
    apart: set[int] = set()
    for line in map(_stampless, lines):
        if ("local_rank" in line or "global_ranks" in line) and (agent := _AGENTS_RANKS.search(line)) is not None:
            rank, local, first = agent.groups()
            apart.add(int(first) if first is not None else int(rank) - int(local))
        label = _TEE.match(line)
        glued = _TEE.search(line, label.end()) if label is not None else None  # another's write on its line
        own = _OWN_RANK.search(line, label.end(), glued.start() if glued else len(line)) if label else None
        if label is not None and own is not None:
            apart.add(int(next(g for g in own.groups() if g)) - int(label.group(1)))
    return apart.pop() if len(apart) == 1 and min(apart) > 0 else 0


def _stampless(line: str) -> str:
    found = _STAMP.match(line)
    return line[found.end() :] if found is not None else line


def _mpi_labelled(lines: list[str]) -> bool:
    """Whether the ``[N] `` before the paste's lines is MPICH's or Intel MPI's rank label (``mpiexec
    -l``): its numbers repeat or fall from a line to the next, where a pasted file's line numbers
    rise by one on every line; not Open MPI's signal handler's ``[PID] ``."""
    numbered = [(found, bare) for line in lines if (found := _NUMBERED.match(bare := _bare(line)))]
    numbers = [int(found.group(1)) for found, bare in numbered if not _HANDLER.match(bare, found.end())]
    return any(b != a + 1 for a, b in pairwise(numbers))


def _pytest_mark(lines: list[str]) -> re.Pattern[str] | None:
    """pytest's mark, where most of the paste's lines start with it (after a stamp or a label):
    ``E`` and the indent every one of them has after it."""
    bare = [_bare(line) for line in lines if line.strip()]
    marked = [found for line in bare if (found := _PYTEST.match(line))]
    if not marked or len(marked) * 2 <= len(bare):
        return None
    indent = min((len(found.group(1)) for found in marked if found.group(1)), default=1)
    return re.compile(rf"E(?: {{1,{indent}}}|\s*$)")


def _bare(line: str) -> str:
    """The line after the stamps and labels before it, but MPICH's ``[N] `` and pytest's ``E``."""
    for _ in range(8):
        found = None if _NUMBERED.match(line) else _STAMP.match(line) or _LABELS.match(line)
        if found is None or not found.end():
            return line
        line = line[found.end() :]
    return line


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
