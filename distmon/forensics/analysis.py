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

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from distmon.channel import Batch
from distmon.flightrecorder import (
    MAX_DUMP_BYTES,
    DumpError,
    Entry,
    RankDump,
    group_name,
    group_ranks,
    load,
    number,
    op_name,
    read_dump,
    text,
)
from distmon.forensics.logs import LogFacts, read_log
from distmon.monitor.admission import MAX_WORLD
from distmon.monitor.alerts import Alert
from distmon.monitor.detector import Detector
from distmon.monitor.limits import Thresholds
from distmon.monitor.monitor import Monitor
from distmon.wire import Frame, GroupStatus, Report, encode, rank_runs

JOB = "analyzed"
"""The job name the reports carry (the files do not say)."""
POST_MORTEM = Thresholds(hang_floor=0.0, hang_intervals=0.0, startup_hang=0.0, stall_floor=0.0, hung_after=0.0)
"""Everything in flight when the job died was waiting: no wait is too short to judge."""
DUMP_DELAY = 60.0
"""Seconds a dump may take to be written after a collective timeout fires."""
MAX_FILES = 1 << 20
MAX_FRAMES = 64
_TRAILING_RANK = re.compile(r"(\d{1,9})(?:\.(?:json|pkl|pickle|pt|bin))?$")
SNIFF = 4096


@dataclass
class RankFacts:
    """What the files say of one rank."""

    rank: int
    source: str
    """The dump's path, or ``log``: the reports name it where a live rank names its host."""
    groups: list[GroupStatus] = field(default_factory=list)
    dump: RankDump | None = None
    stack: list[Frame] | None = None


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

    @property
    def dumps(self) -> int:
        return sum(1 for f in self.ranks.values() if f.dump is not None)


def analyze(paths: list[str], world: int | None = None) -> Analysis:
    """Read every dump and log under ``paths`` and judge the job; never raises for a bad file."""
    files = _Files()
    for path in _files(paths, files.problems):
        files.read(path)
    problems, dumps, log = files.problems, files.dumps, files.log
    for rank in [r for r in log.seen if r >= MAX_WORLD]:
        problems.append(f"the log's rank {rank} is beyond the {MAX_WORLD} ranks distmon judges: left out")
        log.seen.discard(rank)
        log.timeouts.pop(rank, None)
    size, world_from = _world(world, dumps, files.configs, log)
    if size > MAX_WORLD:
        problems.append(f"a world of {size} ranks (from {world_from}) is beyond the {MAX_WORLD} distmon judges")
        size = MAX_WORLD
    facts = {r: RankFacts(r, files.sources[r], d.groups, d, _stack(d.oldest_pending)) for r, d in dumps.items()}
    for rank in sorted(log.timeouts.keys() - facts.keys()):
        facts[rank] = RankFacts(rank, "log", _log_groups(log, rank))
    _place(facts, files.configs, size)
    silent = log.seen - facts.keys()
    missing = {r: "no watchdog line in the log" if r in silent else "no file" for r in range(size) if r not in facts}
    missing.update({r: "empty dump" for r, f in facts.items() if f.dump is not None and not f.dump.groups})
    t = _moment(dumps, log, files.written)
    monitor = Monitor(Detector(limits=POST_MORTEM), job=JOB, max_world=max(size, 1))
    reports = [_report(f, size, t) for f in facts.values() if f.rank < size]
    if reports:
        monitor.ingest_batch(Batch.of([encode(r) for r in reports]), t)
        monitor.tick(t)
    if log.unplaced:
        problems.append(f"{log.unplaced} watchdog lines name no rank (no [rankN]: prefix): left out")
    return Analysis(size, world_from, facts, missing, problems, list(monitor.alerts.history), t, monitor, files.logs)


@dataclass
class _Files:
    """What the files hold, read one at a time: a dump is boiled down to its rank's groups
    as it is read (8192 dumps of 2000 entries are gigabytes)."""

    dumps: dict[int, RankDump] = field(default_factory=dict)
    sources: dict[int, str] = field(default_factory=dict)
    configs: dict[str, list[int]] = field(default_factory=dict)
    """Group name -> its global ranks, from every dump's ``pg_config``."""
    written: list[float] = field(default_factory=list)
    log: LogFacts = field(default_factory=LogFacts)
    logs: int = 0
    problems: list[str] = field(default_factory=list)

    def read(self, path: str) -> None:
        kind = _sniff(path, self.problems)
        if kind == "log":
            self.logs += _read_log(path, self.log, self.problems)
        elif kind == "dump":
            self._read_dump(path)

    def _read_dump(self, path: str) -> None:
        rank = _rank_of(path)
        if rank is None:
            self.problems.append(f"{path}: a dump, but its name does not end in the rank's number")
        elif rank >= MAX_WORLD:
            self.problems.append(f"{path}: rank {rank}, beyond the {MAX_WORLD} ranks distmon judges")
        elif rank in self.dumps:
            self.problems.append(f"{path}: a second dump of rank {rank} (read {self.sources[rank]})")
        elif (dump := _load_dump(path, self.problems)) is not None:
            for name, config in dump.get("pg_config", {}).items():
                members = group_ranks(config)
                if isinstance(name, str) and members:
                    self.configs.setdefault(name, members)
            self.dumps[rank] = read_dump(dump, self.configs)
            self.sources[rank] = path
            self.written.append(_mtime(path))


def _moment(dumps: dict[int, RankDump], log: LogFacts, written: list[float]) -> float:
    """When the ranks are judged: the latest moment the files record, or, when the dumps were
    written within a collective timeout of it (as torch writes them when the watchdog fires),
    the latest of those: a hang's ops were recorded when issued, the dump ten minutes later.
    A copy's time (days later) is not taken."""
    recorded = max([d.t for d in dumps.values() if d.t] + ([log.latest] if log.latest else []), default=0.0)
    timeout = max((g.timeout or 0.0 for d in dumps.values() for g in d.groups), default=0.0)
    fits = [w for w in written if recorded <= w <= recorded + timeout + DUMP_DELAY]
    return max(fits, default=recorded)


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def _files(paths: list[str], problems: list[str]) -> Iterator[str]:
    count = 0
    for path in paths:
        if os.path.isdir(path):
            found = sorted(os.path.join(d, f) for d, _, files in os.walk(path) for f in files)
        elif os.path.exists(path):
            found = [path]
        else:
            problems.append(f"{path}: no such file or folder")
            continue
        for file in found:
            count += 1
            if count > MAX_FILES:
                problems.append(f"more than {MAX_FILES} files: the rest left out")
                return
            yield file


def _sniff(path: str, problems: list[str]) -> str | None:
    """``dump`` (torch's pickle or JSON), ``log`` (text), or None (said in ``problems``)."""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF)
    except OSError as e:
        problems.append(f"{path}: cannot read ({e.strerror})")
        return None
    if head[:1] == b"\x80" or head.lstrip()[:1] == b"{":
        return "dump"
    if b"\0" in head:
        problems.append(f"{path}: neither a Flight Recorder dump nor a log")
        return None
    return "log"


def _rank_of(path: str) -> int | None:
    found = _TRAILING_RANK.search(os.path.basename(path))
    return int(found.group(1)) if found else None


def _load_dump(path: str, problems: list[str]) -> dict[str, Any] | None:
    try:
        if os.path.getsize(path) > MAX_DUMP_BYTES:
            raise DumpError(f"{os.path.getsize(path) >> 20} MiB, over the {MAX_DUMP_BYTES >> 20} MiB a dump may have")
        with open(path, "rb") as f:
            return load(f.read())
    except DumpError as e:
        problems.append(f"{path}: {e}")
    except OSError as e:
        problems.append(f"{path}: cannot read ({e.strerror})")
    return None


def _read_log(path: str, log: LogFacts, problems: list[str]) -> int:
    """1 for a job's log (lines of ranks or of the watchdog), 0 for any other text (an empty
    file, such as a marker, without a word)."""
    before = log.matched
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            read_log(f, log)
            empty = f.tell() == 0
    except OSError as e:
        problems.append(f"{path}: cannot read ({e.strerror})")
        return 0
    if log.matched > before:
        return 1
    if not empty:
        problems.append(f"{path}: text with no watchdog line and no [rankN]: prefix, not a job log")
    return 0


def _world(
    given: int | None, dumps: dict[int, RankDump], configs: dict[str, list[int]], log: LogFacts
) -> tuple[int, str]:
    if given is not None:
        return given, "--world"
    from_dumps = max((max(m) + 1 for m in configs.values() if m), default=0)
    if from_dumps and from_dumps >= max(dumps, default=-1) + 1:
        return from_dumps, "the dumps"
    if log.world:
        return log.world, "the log"
    seen = max([*dumps, *log.seen], default=-1) + 1
    return seen, "the highest rank seen"


def _log_groups(log: LogFacts, rank: int) -> list[GroupStatus]:
    """A rank's timeouts as group statuses: the work that timed out is the oldest in flight."""
    groups = []
    for t in log.timeouts.get(rank, {}).values():
        completed = t.seq - 1 if t.seq else (t.completed or 0)
        groups.append(
            GroupStatus(
                id=t.group,
                backend="nccl",
                size=1,
                ranks=[],
                timeout=None,
                enqueued=max(t.enqueued, t.seq),
                completed=completed,
                desc=t.desc,
                op=t.op,
                since=t.since,
            )
        )
    return groups


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


def _stack(entry: Entry | None) -> list[Frame] | None:
    """Where the rank's oldest op in flight was issued (its ``frames``, with stack traces on),
    innermost last."""
    frames = entry.get("frames") if entry else None
    if not isinstance(frames, list) or not frames:
        return None
    out = [
        Frame(text(f, "filename") or "?", number(f, "line"), text(f, "name") or "?")
        for f in frames[:MAX_FRAMES]
        if isinstance(f, dict)
    ]
    return out[::-1] or None


def entry_json(entry: Entry | None) -> dict[str, Any] | None:
    """An entry as ``--json`` shows it."""
    if entry is None:
        return None
    return {
        "group": group_name(entry) or None,
        "op": op_name(entry),
        "seq": number(entry, "p2p_seq_id") if entry.get("is_p2p") else number(entry, "collective_seq_id"),
        "p2p": bool(entry.get("is_p2p")),
        "state": text(entry, "state"),
        "created": number(entry, "time_created_ns") / 1e9 or None,
    }
