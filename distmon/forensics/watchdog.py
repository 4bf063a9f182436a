"""What one line of NCCL's watchdog says, in every shape torch has printed it.

Shapes read, by torch era (``Rank`` in a PG prefix is the group-local rank)::

    1.9-1.10  [E ProcessGroupNCCL.cpp:587] [Rank 1] Watchdog caught collective operation timeout:
                  WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800412 milliseconds ...
    1.12-2.0  RuntimeError: [Rank 1] Caught collective operation timeout: WorkNCCL(SeqNum=143,
                  OpType=BROADCAST, TensorShape=[1], Timeout(ms)=3600000) ran for ... (Python's)
              [Rank 1] Work WorkNCCL(SeqNum=2521, ...) timed out in blocking wait.
    2.0-2.3   [E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught ... WorkNCCL(SeqNum=51207, ...
    2.4       [PG 0 (default_pg) Rank 7] Exception (either an error or timeout) detected by watchdog
                  at work: 3312, last enqueued NCCL work: 3313, last completed NCCL work: 3311.
              [PG 3 Rank 2] Heartbeat monitor timed out! ...
    2.5-2.6   [PG ID 0 PG GUID 0(default_pg) Rank 1] Timeout at NCCL work: 417, last enqueued NCCL
                  work: 419, last completed NCCL work: 416.
    2.6+      [PG ID 1 PG GUID 1 Rank 3]  failure detected by watchdog at work sequence id: 9120 PG
                  status: last enqueued work: 9122, last completed work: 9119
              [PG ID 0 PG GUID 0(default_pg) Rank 7] ProcessGroupNCCL's watchdog got stuck for 480
                  seconds without making progress in monitoring enqueued collectives.
              [PG ID 17 PG GUID 137 Rank 2] Terminating the process after attempting to dump debug
                  info, due to ProcessGroupNCCL watchdog hang.   (its heartbeat monitor)
    2.5+      [PG ID 0 PG GUID 0(default_pg) Rank 1] Received a dump signal due to a collective timeout
                  from this local rank and we will try our best to dump the debug info. Last enqueued
                  NCCL work: 22, last completed NCCL work: 21.   (or "from  rank 34": that rank's fired)
    any       [PG 2 Rank 3] Process group watchdog thread terminated with exception: CUDA error: an
                  illegal memory access was encountered   (an error of the rank's own device)
              ... terminated with exception: NCCL error: remote process exited or there was a network
                  error   (NCCL's, under the rank: a lost peer's consequence)

The Flight Recorder's dump signal reaches every rank from the first whose watchdog fired; the
counts it prints are those of the group whose heartbeat monitor received it (the world group's):
a rank with nothing in flight there (last enqueued = last completed) waits in no collective of
that group.

A terminal may have wrapped any of these in the middle of a word and a copy may have lost the
space at the cut: the words are matched with or without the spaces between them. A user may
have elided the work's fields (``WorkNCCL(..., OpType=ALLREDUCE, ...)``): what is left is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from distmon.guards.text import visible

MAX_MESSAGE = 300


def _words(phrase: str) -> str:
    """``phrase`` as a pattern its spaces may be missing from (a wrap's cut)."""
    return " ?".join(re.escape(word) for word in phrase.split(" "))


DEFAULT_PG = "default_pg"
"""The world group's description in the lines of torch 2.3 and later."""
WORLD_GROUP = "0"
"""The world group's name: it is created first on every rank, in every torch era."""
PG = re.compile(
    r"\[PG ?ID ?(\d{1,9}) ?PG ?GUID ?(\w{0,200})(?:\(([^)\]]{0,200})\))? ?Rank ?(\d{1,9})\]"
    r"|\[PG ?(\w{1,200})(?: ?\(([^)\]]{0,200})\))? ?Rank ?(\d{1,9})\]"
)
"""A line's process group and the rank's place in it: ``[PG ID 1 PG GUID 1 Rank 3]`` (its GUID
the group's name across ranks; a build that sets none, ``PG GUID  Rank 3``, its ID),
``[PG 3 (desc) Rank 2]``."""


def pg_prefix(found: re.Match[str]) -> tuple[str, str | None, int]:
    """A :data:`PG` match's group name, its description and the rank's place in it."""
    if found.group(1) is not None:
        return found.group(2) or found.group(1), found.group(3), int(found.group(4))
    return found.group(5), found.group(6), int(found.group(7))


BARE_RANK = re.compile(r"\[Rank ?(\d{1,9})\]")
_CAUGHT = re.compile(
    rf"(?:(?:{_words('Watchdog caught collective operation timeout')}|{_words('Caught collective operation timeout')})"
    r" ?: ?|Work )WorkNCCL\((?:SeqNum=(\d{1,18}), ?)?(?:(?:\.{3}|…), ?)?OpType=(\w{1,40})"
)
_NUMEL = re.compile(r"NumelIn=(\d{1,18}), ?NumelOut=(\d{1,18})")
_TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d{1,18})\)")
"""The work's timeout, read only where its closing parenthesis shows the number whole (a paste
cut in the middle of it would make it absurdly low)."""
_RAN_FOR = re.compile(_words("ran for") + r" ?(\d{1,18}) ?milli")
_BLOCKING = re.compile(_words("timed out in blocking wait"))
_AT_WORK = re.compile(
    rf"(?:{_words('detected by watchdog at work')}|{_words('Timeout at NCCL work')}): ?(-?\d{{1,18}}), ?"
    rf"{_words('last enqueued NCCL work')}: ?(-?\d{{1,18}}), ?{_words('last completed NCCL work')}: ?(-?\d{{1,18}})"
)
_SEQ_ID = re.compile(
    rf"{_words('detected by watchdog at work sequence id')}: ?(-?\d{{1,18}}) ?{_words('PG status')}: ?"
    rf"{_words('last enqueued work')}: ?(-?\d{{1,18}}), ?{_words('last completed work')}: ?(-?\d{{1,18}})"
)
_STUCK = re.compile(
    rf"{_words('watchdog got stuck for')} ?(\d{{1,9}}) ?seconds"
    rf"|{_words('Heartbeat monitor timed out')}|{_words('no heartbeat of its')}"
    rf"|{_words('due to ProcessGroupNCCL watchdog hang')}"
)
"""The watchdog itself stuck, in collectives it could no longer follow: a wait with no number."""
_DEVICE_ERROR = re.compile(
    rf"{_words('watchdog thread terminated with exception')}: ?((?:CUDA|NCCL) ?error: ?(.{{1,300}}))"
)
"""The watchdog found an error: of the rank's own device (a CUDA error, the rank's fault, not a
wait), or of NCCL (a remote process exited, the network: a lost peer's consequence)."""
_FIRED = re.compile(
    rf"{_words('Some NCCL operations have failed or timed out')}|{_words('we are taking the entire process down')}"
    rf"|{_words('Stack trace of the failed collective not found')}|{_words('preparing to dump debug info')}"
    rf"|{_words('First PG on this rank to signal dumping')}|{_words('Watchdog caught collective operation timeout')}"
)
"""What a rank's watchdog prints after it gave up on a work of the rank's own, without its number
(the first of its groups to give up sends the dump signal to every rank), or its message cut
before the work's fields."""
_DUMP_SIGNAL = re.compile(
    rf"{_words('Received a dump signal due to a collective timeout from')}"
    rf" +(?:{_words('this local rank')}|rank ?(\d{{1,9}})).{{0,300}}?"
    rf"{_words('Last enqueued NCCL work')}: ?(-?\d{{1,18}}), ?{_words('last completed NCCL work')}: ?(-?\d{{1,18}})"
)
"""The Flight Recorder's dump signal, with the counts of the group that received it."""
_WATCHDOG_WORDS = ("atchdog", "WorkNCCL", "NCCL work", "eartbeat", "ProcessGroupNCCL", "dump signal")
"""Words of a line that may be the start of a watchdog line a terminal wrapped."""
OPTIONS = re.compile(
    _words("ProcessGroupNCCL initialization options") + r": ?size: ?(\d{1,9}), ?global rank: ?(\d{1,9})"
)

OPS = {
    "ALLREDUCE": "all_reduce",
    "_ALLGATHER_BASE": "_all_gather_base",
    "ALLGATHER": "all_gather",
    "_REDUCE_SCATTER_BASE": "_reduce_scatter_base",
    "REDUCE_SCATTER": "reduce_scatter",
    "ALLTOALL_BASE": "all_to_all",
    "ALLTOALL": "all_to_all",
    "BROADCAST": "broadcast",
    "REDUCE": "reduce",
    "BARRIER": "barrier",
    "GATHER": "gather",
    "SCATTER": "scatter",
    "COALESCED": "coalesced",
    "SEND": "send",
    "RECV": "recv",
}
"""The watchdog's ``OpType`` as the Flight Recorder names the op."""
GATHERS = ("_all_gather_base", "all_gather")
"""Ops whose output is the group's size times their input."""
SCATTERS = ("_reduce_scatter_base", "reduce_scatter")
"""Ops whose input is the group's size times their output."""


@dataclass
class Said:
    """What one watchdog line says (None where it does not say)."""

    group: str | None = None
    """The group's name, where the line has a PG prefix."""
    desc: str | None = None
    local: int | None = None
    """The rank's place in the group (``Rank k`` of the PG prefix)."""
    bare: int | None = None
    """The ``[Rank N]`` of a line without a PG prefix."""
    seq: int | None = None
    op: str | None = None
    enqueued: int | None = None
    completed: int | None = None
    ran: float | None = None
    """Seconds the work ran before the watchdog gave up on it."""
    timeout_ms: int | None = None
    numel: tuple[int, int] | None = None
    stuck: float | None = None
    """The watchdog stuck (a heartbeat line): for how many seconds, 0 where it does not say."""
    error: str | None = None
    """``CUDA error: ...`` (the rank's own device failed) or ``NCCL error: ...`` (NCCL failed
    under it, as when a remote process exited): what the watchdog ended with."""
    fired: bool = False
    """The rank's watchdog gave up on a work the line does not number."""
    fired_by: int | None = None
    """Another rank whose watchdog fired first (the dump signal came from it)."""
    idle: bool = False
    """The group has nothing in flight on this rank (a dump signal's counts)."""

    @property
    def unplaced(self) -> str:
        """``rank 5 of group 3: _all_gather_base #9141`` (its global rank not in the line)."""
        who = f"rank {self.local} of group {self.group}" if self.group is not None else "a rank"
        what = self.error or " ".join(p for p in (self.op, f"#{self.seq}" if self.seq is not None else None) if p)
        return f"{who}: {what or 'its watchdog fired'}"


def own_device_error(said: list[Said]) -> Said | None:
    """The one group-local rank whose watchdog lines, placed on no global rank, end with its own device's error (a
    CUDA error, not NCCL's under it); None where they name none or several."""
    own = {(s.group, s.local): s for s in said if s.local is not None and (s.error or "").startswith("CUDA error")}
    return next(iter(own.values())) if len(own) == 1 else None


_CONTINUES = re.compile(r"\s*(?:WorkNCCL\(|ran for |before timing out|last (?:enqueued|completed)|PG status)")
"""How the rest of a watchdog message a person broke over lines starts."""


def continues(line: str) -> bool:
    """The line is the rest of a watchdog message, as a person broke it (``  WorkNCCL(...``,
    ``  ran for 1800090 milliseconds ...``)."""
    return bool(_CONTINUES.match(line))


def is_watchdog(line: str) -> bool:
    return any(word in line for word in _WATCHDOG_WORDS)


def whole(line: str) -> bool:
    """Holds a whole watchdog message: one whose last number is followed by more text (a
    wrap may cut ``work: 3311.`` after ``work: 33``)."""
    caught = _CAUGHT.search(line)
    if caught:
        return bool(_RAN_FOR.search(line, caught.end()) or _BLOCKING.search(line, caught.end()))
    end = len(line.rstrip())
    counts = _AT_WORK.search(line) or _SEQ_ID.search(line)
    return bool((counts and counts.end() < end) or _STUCK.search(line) or _DEVICE_ERROR.search(line))


def watchdog_said(line: str) -> Said | None:
    """What the line says, if it is one of the watchdog's about a work, its heartbeat, or its
    device; None for any other line."""
    if not is_watchdog(line):
        return None
    caught, counts = _CAUGHT.search(line), _AT_WORK.search(line) or _SEQ_ID.search(line)
    device = None if (caught or counts) else _DEVICE_ERROR.search(line)
    stuck = None if (caught or counts or device) else _STUCK.search(line)
    signal = None if (caught or counts or device or stuck) else _DUMP_SIGNAL.search(line)
    fired = None if (caught or counts or device or stuck or signal) else _FIRED.search(line)
    if not (caught or counts or device or stuck or signal or fired):
        return None
    found = Said(fired=fired is not None)
    _prefix(found, line)
    if signal:
        _dump_signal(found, signal)
    if caught:
        _caught(found, line, caught)
    if counts:
        if found.seq is None:
            found.seq = int(counts.group(1))
        found.enqueued, found.completed = int(counts.group(2)), int(counts.group(3))
    if device:
        found.error = visible(device.group(1).strip(), MAX_MESSAGE)
    if stuck:
        found.stuck = float(stuck.group(1) or 0)
    return found


def _prefix(found: Said, line: str) -> None:
    pg = PG.search(line)
    if pg is not None:
        found.group, desc, found.local = pg_prefix(pg)
        found.desc = visible(desc, 200) if desc else None
    elif bare := BARE_RANK.search(line):
        found.bare = int(bare.group(1))


def _caught(found: Said, line: str, caught: re.Match[str]) -> None:
    if caught.group(1) is not None:
        found.seq = int(caught.group(1))
    if line[caught.end() : caught.end() + 1] in (",", ")"):  # the name whole, not cut with the paste's end
        found.op = OPS.get(caught.group(2), caught.group(2).lower())
    rest = line[caught.end() : caught.end() + 400]
    numel, timeout, ran = _NUMEL.search(rest), _TIMEOUT_MS.search(rest), _RAN_FOR.search(line, caught.end())
    if numel:
        found.numel = (int(numel.group(1)), int(numel.group(2)))
    if timeout:
        found.timeout_ms = int(timeout.group(1))
    if ran:
        found.ran = int(ran.group(1)) / 1000


def _dump_signal(found: Said, signal: re.Match[str]) -> None:
    """The group's counts where the dump signal arrived: a wait in the work after the last
    completed, or nothing in flight."""
    by, enqueued, completed = signal.groups()
    found.fired_by = int(by) if by is not None else None
    found.fired = by is None
    found.enqueued, found.completed = int(enqueued), int(completed)
    if found.enqueued > found.completed:
        found.seq = found.completed + 1
    else:
        found.idle = True
