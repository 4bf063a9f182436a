"""What a job that ran without distmon left behind (Flight Recorder dumps, the watchdog's log
lines), judged as the live monitor judges a job.

Each rank's dump or log lines become the report that rank would have sent (its groups'
collective counts and the oldest one in flight, its point-to-point channels), and those
reports go through a real :class:`Monitor`: the same wait-for relation, the same words. A
rank with no file is never heard from, which the hang rule already takes for the end of a
wait. The thresholds are the only thing set apart: the job is over, so whatever stood in
flight when the dumps were taken was waiting, however briefly the dump saw it.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Any

from distmon.flightrecorder.fields import Entry, RankDump, created_at, entry_group, entry_op, number, text_field
from distmon.forensics.inputs import Files, walk
from distmon.forensics.logfacts import LogFacts
from distmon.forensics.standings import statuses
from distmon.forensics.worker_exits import SIGABRT
from distmon.monitor.pipeline import Monitor
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state.admission import MAX_WORLD
from distmon.monitor.state.alerts import Alert
from distmon.monitor.state.limits import Thresholds
from distmon.monitor.state.words import rank_word
from distmon.wire import GroupStatus, Report, StackFrame, encode, rank_runs
from distmon.wire.sockets import Batch

JOB = "analyzed"
"""The job name the reports carry (the files do not say)."""
POST_MORTEM = Thresholds(hang_floor=0.0, hang_intervals=0.0, startup_hang=0.0, stall_floor=0.0, hung_after=0.0)
"""Everything in flight when the job died was waiting: no wait is too short to judge."""
DUMP_DELAY = 60.0
"""Seconds a dump may take to be written after a collective timeout fires."""
UNSTATED_TIMEOUT = 1800.0
"""The collective timeout of dumps that state none (torch 2.2's and 2.3's): torch's longest default, 30
minutes (gloo's, and NCCL's in older torch)."""
MAX_FRAMES = 64

NO_FILE = "no file"
"""Why a rank of a set of dumps has none: no file of its is among them."""
NO_LINE = "no line in the log"
"""Why a rank a log shows nothing of is not heard from."""


@dataclass
class RankFacts:
    """What the files say of one rank."""

    rank: int
    source: str
    """The dump's path, or ``log``: the reports name it where a live rank names its host."""
    groups: list[GroupStatus] = field(default_factory=list)
    dump: RankDump | None = None
    stack: list[StackFrame] | None = None


@dataclass
class Analysis:
    world: int
    world_from: str
    """Where the world size was read: ``--world``, ``the dumps``, ``the log``, ``the highest rank seen``."""
    ranks: dict[int, RankFacts]
    missing: dict[int, str]
    """Ranks with no file, or whose dump is empty: why, in a few words."""
    problems: list[str]
    """One line per file that could not be read."""
    alerts: list[Alert]
    t: float
    """The latest moment the files record: what every rank is judged at."""
    monitor: Monitor
    logs: int = 0
    """Logs read."""
    log: LogFacts = field(default_factory=LogFacts)
    """What the logs said, rank by rank."""
    timed: bool = True
    """:attr:`t` is a moment the files give; else only how long each wait ran is known."""

    @property
    def dumps(self) -> int:
        return sum(1 for f in self.ranks.values() if f.dump is not None)


def analyze(paths: list[str], world: int | None = None) -> Analysis:
    """Read every dump and log under ``paths`` and judge the job; never raises for a bad file."""
    files = Files()
    for path in walk(paths, files.problems, files.log.restarts):
        files.read(path, named=path in paths)
    files.read_dumps()
    problems, dumps, log = files.problems, files.dumps, files.log
    for rank in [r for r in log.seen if r >= MAX_WORLD]:
        problems.append(f"the log's rank {rank} is beyond the {MAX_WORLD} ranks distmon judges: left out")
        log.forget(rank)
    size, world_from = _world(world, dumps, files.configs, log)
    if size > MAX_WORLD:
        problems.append(f"a world of {size} ranks (from {world_from}) is beyond the {MAX_WORLD} distmon judges")
        size = MAX_WORLD
    facts = {r: RankFacts(r, files.sources[r], d.groups, d, _stack(d.oldest_pending)) for r, d in dumps.items()}
    t, timed = _moment(dumps, log, files.written)
    found = statuses(log, size, t)
    for rank in sorted((found.keys() | log.raised.keys()) - facts.keys()):
        facts[rank] = RankFacts(rank, "log", found.get(rank, []))
    _place(facts, files.configs, size)
    for rank, pasted in log.stacks.ranked.items():  # where it stood, where no dump says where it issued its wait
        if rank in facts and facts[rank].stack is None:
            facts[rank].stack = pasted.frames
    missing = {r: _why_missing(r, log, files, bool(dumps)) for r in range(size) if r not in facts}
    missing.update({r: "empty dump" for r, f in facts.items() if f.dump is not None and not f.dump.groups})
    monitor = Monitor(Detector(limits=POST_MORTEM), job=JOB, max_world=max(size, 1))
    reports = [_last_words(_report(f, size, t), log) for f in facts.values() if f.rank < size]
    if reports:
        monitor.ingest_batch(Batch.of([encode(r) for r in reports]), t)
        monitor.tick(t)
    if log.unplaced_lines:
        problems.append(f"{log.unplaced_lines} watchdog lines name no global rank (no [rankN]: prefix): left out")
    alerts = list(monitor.alerts.history)
    return Analysis(size, world_from, facts, missing, problems, alerts, t, monitor, files.logs, log, timed)


def _why_missing(rank: int, log: LogFacts, files: Files, dumps: bool) -> str:
    """Why a rank has no report: its dump missing or unread, or, with logs alone, the log's
    silence (a launcher's word on its end alone; its lines, but no watchdog line; or no line at all)."""
    if dumps or rank in files.unread:
        return files.unread.get(rank, NO_FILE)
    if rank in log.waiting:
        return "its waits are in groups the log does not name"
    if rank in log.cut_in:
        return f"no watchdog line in the log; its traceback, cut, ends in {log.cut_in[rank]}"
    if (pasted := log.stacks.ranked.get(rank)) is not None:
        return f"no watchdog line in the log, only a stack {pasted.how} took"
    if rank in log.seen:
        return "no watchdog line in the log"
    if rank in log.announced:
        return "only its `Initializing distributed` line in the log"
    if (said := log.ended(rank)) is not None:
        return f"only {said.by}'s word on how it ended"
    return NO_LINE


def _moment(dumps: dict[int, RankDump], log: LogFacts, written: list[float]) -> tuple[float, bool]:
    """When the ranks are judged, and whether the files give that moment: the moment the dumps
    were taken. Torch takes them when the first watchdog fires, a collective timeout after the
    oldest work in flight was enqueued, so a hang's entries are minutes older than its dump. A
    dump's file time is that moment where it falls within a timeout of the entries (a copy's
    time, days later, is not); else the first timeout's firing, read off each rank's oldest
    pending work; else the latest moment the files record; else, where no line has a time,
    the longest wait a line states, so that each wait counts from when it began."""
    recorded = max([d.t for d in dumps.values() if d.t] + ([log.latest] if log.latest else []), default=0.0)
    if not recorded:
        ran = [t.ran or t.stuck or 0.0 for ts in log.timeouts.values() for t in ts.values()]
        return max(ran, default=0.0), False
    timeout = max((g.timeout or 0.0 for d in dumps.values() for g in d.groups), default=0.0)
    timeout = timeout or (UNSTATED_TIMEOUT if dumps else 0.0)
    fits = [w for w in written if recorded <= w <= recorded + timeout + DUMP_DELAY]
    if fits:
        return max(fits), True
    fired = [
        created_at(e) + number(e, "timeout_ms") / 1000
        for d in dumps.values()
        if (e := d.oldest_pending) is not None and created_at(e) > 0 and number(e, "timeout_ms") > 0
    ]
    return max(recorded, min(fired, default=recorded)), True


def _world(
    given: int | None, dumps: dict[int, RankDump], configs: dict[str, list[int]], log: LogFacts
) -> tuple[int, str]:
    """The world size: ``--world`` unless the files hold ranks beyond it; the dumps' groups;
    a launcher's line or the world group's start; else the most ranks the log shows a group
    or a communicator of (``nranks 8``, an all-gather's element counts, a store-based barrier's
    world size, NCCL's RAS report), or a launcher or a report names, or torchrun's agent closes, or processes print
    NCCL's lines, or Horovod's stalled tensors need (a rank not missing from each), where that is more than the
    highest rank seen; a rank that waits in a collective, or lost its peer in a send or receive, has a peer."""
    seen = max([*dumps, *log.seen], default=-1) + 1
    if given is not None and given >= seen:
        return given, "--world"
    from_dumps = max((max(m) + 1 for m in configs.values() if m), default=0)
    if from_dumps and from_dumps >= max(dumps, default=-1) + 1:
        return from_dumps, "the dumps"
    if log.world and log.world >= seen:
        return log.world, "the log"
    named = max((r for r in (log.listed, log.mentioned) if r is not None), default=-1)
    printing = len(log.nccl.processes) if log.seen else 0  # ranks, but which only the ranks seen say
    barrier = log.stores.counted[0] if log.stores.counted else 0
    paired = 2 if log.p2p_closed else 0  # a send or receive has a peer besides the rank that called it
    # torchrun's agent closes the workers left: they, and any it says ended, are as many ranks
    closed = len(log.closed | {e.pid for e in log.exits if e.pid is not None}) if log.closed else 0
    counted = max(log.nccl.nranks or 0, log.largest_group or 0, named + 1, printing, barrier, paired, closed)
    counted = max(counted, log.horovod.least_world(), log.ras.largest)
    if counted > seen:
        return counted, "the log"
    # a waiting rank has a peer: one after it where it is its group's first (group-local rank 0)
    first = [r for r, ts in log.timeouts.items() if any(t.local == 0 and not t.idle for t in ts.values())]
    least = max([r + 2 for r in first] + [2])
    if log.waiting and least > seen:
        return least, "the log (a rank waits in a collective: it has a peer)"
    return seen, "the highest rank seen"


def _last_words(report: Report, log: LogFacts) -> Report:
    """A rank whose traceback the log holds says it in its report, as a live rank's hook does."""
    report.exception = log.last_words(report.rank, report.t)
    return report


def _place(facts: dict[int, RankFacts], configs: dict[str, list[int]], world: int) -> None:
    """Give each group its members where the rank's own dump did not: another dump's
    ``pg_config``, else the world for ``default_pg``, else the ranks that report it."""
    reporting: dict[str, list[int]] = {}
    for f in facts.values():
        for g in f.groups:
            reporting.setdefault(g.id, []).append(f.rank)
    for f in facts.values():
        for g in f.groups:
            if g.ranks:
                continue
            members = configs.get(g.id) or (list(range(world)) if g.desc == "default_pg" else reporting[g.id])
            g.ranks, g.size = rank_runs(sorted(members)), len(members)


def _report(f: RankFacts, world: int, t: float) -> Report:
    p2p = f.dump.p2p if f.dump else []
    backend = next((g.backend for g in f.groups), None)
    return Report(
        job=JOB,
        rank=f.rank,
        world=world,
        host=os.path.basename(f.source),
        pid=0,
        t=t,
        n=1,
        interval=1.0,
        backend=backend,
        groups=f.groups,
        p2p=p2p,
        stack=f.stack,
    )


def _stack(entry: Entry | None) -> list[StackFrame] | None:
    """Where the rank's oldest op in flight was issued (its ``frames``, with stack traces on),
    innermost last."""
    frames = entry.get("frames") if entry else None
    if not isinstance(frames, list) or not frames:
        return None
    out = [
        StackFrame(text_field(f, "filename") or "?", number(f, "line"), text_field(f, "name") or "?")
        for f in frames[:MAX_FRAMES]
        if isinstance(f, dict)
    ]
    return out[::-1] or None


def entry_json(entry: Entry | None) -> dict[str, Any] | None:
    """An entry as ``--json`` shows it."""
    if entry is None:
        return None
    return {
        "group": entry_group(entry) or None,
        "op": entry_op(entry),
        "seq": number(entry, "p2p_seq_id") if entry.get("is_p2p") else number(entry, "collective_seq_id"),
        "p2p": bool(entry.get("is_p2p")),
        "state": text_field(entry, "state"),
        "created": number(entry, "time_created_ns") / 1e9 or None,
    }


def unseen(analysis: Analysis, rank: int) -> str:
    """Why a rank no file shows is suspected: no line of its in the log (a launcher's word that it aborted, as a
    watchdog ends a rank that timed out, said: it may have waited too), or its dump missing from a set."""
    if (end := analysis.log.ended(rank)) is not None and end.code == SIGABRT and analysis.log.timeouts:
        return f"{NO_LINE}; {end.by} says it ended by SIGABRT, as a watchdog ends a rank that timed out"
    if not analysis.dumps or analysis.missing.get(rank) != NO_FILE:
        return silent_node(analysis.log, rank) or NO_LINE
    return (
        f"{NO_FILE}: not gathered (torch writes each rank's dump on its own node, in /tmp by default), or it was "
        "killed, crashed before its watchdog fired, or lost its node"
    )


def silent_node(log: LogFacts, rank: int) -> str | None:
    """Why ``rank`` is suspected where NCCL's lines place it on a host none of whose ranks has a line, while ranks of
    another host wait: that node, as a whole (a node fails so: its network, its processes, the machine), before a
    habit of rank 0's (busy alone, its node's other ranks would wait and say so)."""
    placed = log.nccl.placed()
    host = next((h for h, ranks in placed.items() if rank in ranks), None)
    if host is None or placed[host] & (log.seen | log.waiting | log.raised.keys()):
        return None
    waiting = sorted(h for h, ranks in placed.items() if ranks & log.waiting)
    if not waiting:
        return None
    return (
        f"{NO_LINE}; every rank NCCL's lines place on {host} ({rank_word(sorted(placed[host]))}) is silent while "
        f"the ranks on {', '.join(waiting[:3])}{' and more' if len(waiting) > 3 else ''} wait: that node as a whole "
        "(the machine, its network, its processes) is what to check first"
    )


def a_nodes(ranks: list[int], world: int) -> bool:
    """Whether ``ranks`` (sorted) could be one node's or more, whose files were left there: a run of
    consecutive ranks (torchrun, srun's blocks), ranks a stride apart (round-robin placement), or a
    quarter of the world or more."""
    steps = {b - a for a, b in itertools.pairwise(ranks)}
    return steps == {1} or (len(steps) == 1 and len(ranks) > 2) or len(ranks) * 4 >= world
