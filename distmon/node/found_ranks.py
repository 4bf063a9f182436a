"""Ranks found on this node with no hook in them, reported for by the node's eye
(``distmon watch --find``, ``distmon relay --find``, ``distmon look``).

Most hung jobs people bring were started without distmon. Their ranks cannot report, so the
eye writes each one's report for it, once an interval, from what can be seen from outside:
who it is (its launcher's variables, :mod:`distmon.node.finder`), its training thread's
stack (py-spy, without stopping it), since when that stack has stood still, what its process
did (``/proc``: CPU, bytes moved, memory), and, while it waits on its DataLoader, its
workers' stacks. The report says it is the eye's (:class:`~distmon.wire.Outside`), and the
monitor judges it through the one pipeline: the same rules, recording and screens as a rank
that reports itself. A rank that later attaches the hook is the same rank, now reporting.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import psutil

from distmon import wire
from distmon.node import proc
from distmon.node.finder import Finder, Found, FoundRank
from distmon.node.pyspy import Sampled, sample
from distmon.node.torch_frames import C10D
from distmon.wire import (
    ANY_SOURCE,
    GONE,
    STALL_FLOOR,
    ExitInfo,
    Loader,
    Memory,
    Outside,
    Report,
    StackFrame,
    Usage,
    Worker,
)

INTERVAL = 1.0
"""Seconds between two reports for a found rank: a scan, a look and a stack each."""
STILL_LOOKS = 3
"""Stacks in a row that must agree, :data:`~distmon.wire.STALL_FLOOR` apart at least, before a
rank's stack counts as standing still: one stack may catch a busy rank twice at one line."""
ASLEEP_CPU = 0.02
"""CPU seconds a main thread may use between two looks and still be asleep: the kernel counts
in ticks of 10 ms."""
ASLEEP_WAKES = 3
"""Context switches it may make between two looks and still be asleep (a wait with a timeout)."""
USAGE_WINDOW = 10.0
"""Seconds of CPU and bytes a report's usage covers, as a rank's own does."""
SAMPLERS = 4
"""py-spy runs at once."""
SAMPLE_WAIT = 0.8
"""Of an interval, the share a turn waits for its stacks: a rank whose py-spy is slower reports
with its last stack, and its new one counts at the next turn (one slow look delays no other)."""
MAX_HELD = 4096
"""Reports held for the next :meth:`FoundRanks.take`, at most: the latest."""
P2P_ARGS = {"send": "dst", "isend": "dst", "recv": "src", "irecv": "src"}
"""The argument of each point-to-point op that names its peer."""
WORKER_LOOP = "torch/utils/data/_utils/worker.py"
SPAWN = "torch/multiprocessing/spawn.py"
"""Where ``torch.multiprocessing.spawn`` wraps the user's function: ``_wrap(fn, i, ...)`` calls
``fn(i, ...)``, ``i`` the rank by torch's own convention."""
PROCESS_RUN = "multiprocessing/process.py"
Sampler = Callable[[int], "dict[int, Sampled] | str"]


@dataclass
class _Watched:
    """What the eye keeps of one found rank between its reports."""

    rank: FoundRank
    n: int = 0
    signature: tuple[tuple[str, int, str], ...] | None = None
    still_since: float = 0.0
    still_looks: int = 0
    at: tuple[tuple[str, int, str], ...] | None = None
    """Its stack's place at the last look, busy or not, since ``at_since`` for ``at_looks`` looks."""
    at_since: float = 0.0
    at_looks: int = 0
    progress: tuple[float, int] | None = None
    """Its main thread's CPU seconds and context switches at the last look."""
    owned_gil: bool = False
    stack: list[StackFrame] | None = None
    """Its training thread's last stack taken."""
    usage: deque[tuple[float, float, int, int]] = field(default_factory=deque)
    """(when, CPU seconds, bytes read, bytes written) over :data:`USAGE_WINDOW`."""
    sampling: Future[dict[int, Sampled] | str] | None = None
    """Its stack being taken, when it is."""
    read: tuple[int, int] | None = None
    """Its rank and world, as its stack told them (its launcher wrote them nowhere)."""
    not_a_rank: bool = False
    """Its stack shows it is no rank: a process ``multiprocessing`` spawned for another purpose."""
    tid: int | None = None
    """Its training thread's native id, where it is not its main thread (a Ray Train worker's)."""

    @property
    def identity(self) -> tuple[int, int] | None:
        """Its rank and world, where known."""
        if self.rank.rank is not None:
            return self.rank.rank, self.rank.world
        return self.read


class FoundRanks:
    """Finds the ranks on this node and writes their reports, on a thread of its own; a relay's
    or a monitor's loop only takes the frames written (:meth:`take`). ``pick``: a pid of the
    job to follow (a rank's, or its launcher's); ``job``: the job's id; every job found
    otherwise."""

    def __init__(
        self,
        host: str,
        pick: int | None = None,
        interval: float = INTERVAL,
        finder: Finder | None = None,
        sampler: Sampler = sample,
        job: str | None = None,
    ) -> None:
        self.host = host
        self.pick = pick
        self.job = job
        self.interval = interval
        self._finder = finder or Finder()
        self._sampler = sampler
        self._watched: dict[tuple[int, float], _Watched] = {}
        self._frames: list[bytes] = []
        self._still: list[int] = []
        self._unread: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.found = Found()
        """The last scan: every job on this node, for a command to say what it found."""
        self.scans = 0
        self._pool = ThreadPoolExecutor(SAMPLERS, thread_name_prefix="distmon-found-stack")
        self._thread = threading.Thread(target=self._run, name="distmon-found", daemon=True)
        self._thread.start()

    def take(self) -> list[bytes]:
        """The reports written since the last call, as frames."""
        with self._lock:
            frames, self._frames = self._frames, []
        return frames

    @property
    def parents(self) -> dict[int, int]:
        """Every process's parent on this node, as of the last scan."""
        return self._finder.parents

    def still(self) -> list[int]:
        """The ranks whose stacks stood where they are at the last two looks, by pid: the
        eye looks at them closely, so that what they do is told as soon as the monitor asks."""
        with self._lock:
            return list(self._still)

    def unread(self) -> dict[str, list[int]]:
        """Per job followed, the processes found as its ranks whose rank could not be read (by
        pid): their launcher wrote it nowhere, and their stacks do not show it."""
        with self._lock:
            return {job: list(pids) for job, pids in self._unread.items()}

    def hosts_of(self, job: str) -> list[str]:
        """The job's other hosts, as this node can tell (:meth:`~distmon.node.finder.Finder.hosts_of`)."""
        return self._finder.hosts_of(self.found.jobs.get(job, []))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                frames = self._turn()
            except Exception:  # the eye watches on: one bad turn costs one interval's reports
                frames = []
            still = [w.rank.pid for w in self._watched.values() if w.still_looks >= 2]
            unread: dict[str, list[int]] = {}
            for w in self._watched.values():
                if w.identity is None and not w.not_a_rank:
                    unread.setdefault(w.rank.job, []).append(w.rank.pid)
            with self._lock:
                self._frames.extend(frames)
                del self._frames[:-MAX_HELD]
                self._still = still
                self._unread = unread
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def _turn(self) -> list[bytes]:
        """One scan, then a report for each rank of the jobs followed whose rank is known: with
        its stack where py-spy answered within the turn, else with the last it took."""
        found = self._finder.scan()
        self.found, self.scans = found, self.scans + 1
        ranks = {(r.pid, r.started): r for r in self._followed(found)}
        ended = [self._watched.pop(key) for key in [key for key in self._watched if key not in ranks]]
        gone = [self._gone(w) for w in ended if w.identity is not None]
        for key, rank in ranks.items():
            w = self._watched.setdefault(key, _Watched(rank))
            w.rank = rank
            if w.sampling is None:
                w.sampling = self._pool.submit(self._sampler, rank.pid)
        watched = [self._watched[key] for key in ranks]
        wait([w.sampling for w in watched if w.sampling is not None], timeout=self.interval * SAMPLE_WAIT)
        reports = []
        for w in watched:
            rank, taken = w.rank, None
            if w.sampling is not None and w.sampling.done():
                taken, w.sampling = w.sampling.result(), None
                _identify(w, taken)
            if w.identity is not None and (rank.thread is None or w.tid is not None or _trains_in(w, taken)):
                reports.append(self._report(w, taken))
        return gone + reports

    def _followed(self, found: Found) -> list[FoundRank]:
        if self.job is not None:
            return found.jobs.get(self.job, [])
        if self.pick is None:
            return [r for ranks in found.jobs.values() for r in ranks]
        job = found.job_of(self.pick, self._finder.parents)
        return found.jobs.get(job, []) if job is not None else []

    def _gone(self, w: _Watched) -> bytes:
        """The last report for a rank whose process is gone: how it ended cannot be seen."""
        r, t = w.rank, time.time()
        rank, world = w.identity or (0, 1)
        w.n += 1
        report = Report(
            job=r.job, rank=rank, world=world, host=self.host, pid=r.pid, t=t, n=w.n,
            interval=self.interval, local_rank=r.local_rank, stack=w.stack, tid=w.tid or r.pid,
            exit=ExitInfo(GONE, t), outside=Outside(r.launcher),
        )  # fmt: skip
        return wire.encode(report)

    def _report(self, w: _Watched, taken: dict[int, Sampled] | str | None) -> bytes:
        """Its report: its stack as ``taken`` now (None: py-spy has not answered yet, its last
        stack stands)."""
        r, t = w.rank, time.time()
        rank, world = w.identity or (0, 1)
        w.n += 1
        if isinstance(taken, dict):
            w.tid = _training_thread(r, taken) or w.tid
        tid = w.tid or r.pid
        look = proc.look(r.pid, time.monotonic(), tid)
        thread = taken.get(tid) if isinstance(taken, dict) else None
        fresh = thread is not None and bool(thread.frames)
        w.stack = thread.frames if thread is not None and fresh else w.stack
        stack = w.stack  # a look torn while the thread ran keeps the last, a second old at most
        error = None if stack else taken if isinstance(taken, str) else "py-spy found no frame in its main thread"
        if taken is None and not stack:
            error = "py-spy has not answered yet"
        stalled = _stood(w, thread if fresh else None, proc.thread_counters(r.pid, tid), t)
        loaders = self._loaders(r, stack, stalled) if stack is not None else []
        usage = _usage(w, look, t) if look is not None else None
        stood = _stood_at(w, thread if fresh else None, t)
        outside = Outside(r.launcher, _peer(thread) if thread else None, _holds_gil(thread, look), error, stood)
        rss = proc.rss(r.pid)
        report = Report(
            job=r.job,
            rank=rank,
            world=world,
            host=self.host,
            pid=r.pid,
            t=t,
            n=w.n,
            interval=self.interval,
            local_rank=r.local_rank,
            stalled_since=stalled,
            stack=stack,
            memory=Memory(rss) if rss is not None else None,
            usage=usage,
            loaders=loaders,
            outside=outside,
            tid=tid,
        )
        return wire.encode(report)

    def _loaders(self, r: FoundRank, stack: list[StackFrame], since: float | None) -> list[Loader]:
        """While the rank waits on its DataLoader: its workers, each with its stack, and the
        one that owes the batch where one alone is busy elsewhere than waiting for work."""
        if since is None or not any(f.file.endswith("torch/utils/data/dataloader.py") for f in stack):
            return []
        workers = []
        for pid in r.workers:
            taken = self._sampler(pid)
            thread = taken.get(pid) if isinstance(taken, dict) else None
            error = taken if isinstance(taken, str) else None
            frames = thread.frames if thread is not None else None
            workers.append(Worker(pid, psutil.pid_exists(pid), id=_worker_id(thread), stack=frames,
                                  stack_error=error))  # fmt: skip
        busy = [w for w in workers if w.stack and not _waits_for_work(w.stack)]
        owes = busy[0].id if len(busy) == 1 else None
        return [Loader(0, len(workers), workers, worker=owes, since=since)] if workers else []


def _trains_in(w: _Watched, taken: dict[int, Sampled] | str | None) -> bool:
    """Whether the thread that trains in a rank whose training thread is not its main one is
    known by now (its reports wait for it: a look at another thread would say nothing of it)."""
    return isinstance(taken, dict) and _training_thread(w.rank, taken) is not None


def _training_thread(r: FoundRank, taken: dict[int, Sampled]) -> int | None:
    """The thread that trains in ``r``: its main thread, or where the training thread is
    another (a Ray Train worker's), the one whose stack stands there."""
    if r.thread is None:
        return r.pid
    return next((tid for tid, s in taken.items() if any(r.thread in f.file for f in s.frames)), None)


def _identify(w: _Watched, taken: dict[int, Sampled] | str) -> None:
    """Read the rank of a process found with none written anywhere off its main thread's stack
    (it reads the same at every look: once read, it stays): ``mp.spawn``'s wrapper's index,
    ``init_process_group``'s ``rank`` and ``world_size``. A process ``multiprocessing`` runs for
    another purpose than torch's spawn is no rank."""
    thread = taken.get(w.rank.pid) if isinstance(taken, dict) else None
    if w.identity is not None or thread is None:
        return
    for frame, args in zip(thread.frames, thread.args, strict=True):
        if frame.file.endswith(SPAWN) and frame.func == "_wrap" and args.get("i", "").isdigit():
            w.read = int(args["i"]), w.rank.world or 1
            return
        rank, world = args.get("rank", "").strip(), args.get("world_size", "").strip()
        if frame.file.endswith(C10D) and frame.func == "init_process_group" and rank.isdigit():
            w.read = int(rank), int(world) if world.isdigit() else w.rank.world or 1
            return
    running = any(f.file.endswith(PROCESS_RUN) and f.func == "run" for f in thread.frames)
    w.not_a_rank = w.rank.spawned and running


def _stood(w: _Watched, thread: Sampled | None, progress: tuple[float, int] | None, t: float) -> float | None:
    """Since when the rank has made no progress seen from outside, once that has lasted
    :data:`STILL_LOOKS` looks and :data:`~distmon.wire.STALL_FLOOR` seconds; None while it
    moves. No progress: the same stack at each look, and its main thread either asleep in it
    (no CPU, next to no wakes: a rank stepping through the same line at every look, the time
    a step spends in backward, does not) or holding the GIL in it (one long call). A look
    whose stack could not be taken (torn while the thread ran, or refused) changes nothing."""
    if thread is None:
        return w.still_since if w.still_looks >= STILL_LOOKS else None
    signature = tuple((f.file, f.line, f.func) for f in thread.frames)
    before, w.progress = w.progress, progress
    asleep = progress is not None and before is not None and _asleep(before, progress)
    held = thread.owns_gil and w.owned_gil
    w.owned_gil = thread.owns_gil
    if signature != w.signature or not (asleep or held):
        w.signature, w.still_since, w.still_looks = signature, t, 1
        return None
    w.still_looks += 1
    if w.still_looks >= STILL_LOOKS and t - w.still_since >= STALL_FLOOR:
        return w.still_since
    return None


def _stood_at(w: _Watched, thread: Sampled | None, t: float) -> float | None:
    """Since when the rank's stack has stood where it is, busy or not, once that has lasted
    :data:`STILL_LOOKS` looks and :data:`~distmon.wire.STALL_FLOOR` seconds; None while it moves."""
    if thread is not None:
        signature = tuple((f.file, f.line, f.func) for f in thread.frames)
        if signature == w.at:
            w.at_looks += 1
        else:
            w.at, w.at_since, w.at_looks = signature, t, 1
    return w.at_since if w.at_looks >= STILL_LOOKS and t - w.at_since >= STALL_FLOOR else None


def _holds_gil(thread: Sampled | None, look: proc.Sample | None) -> bool:
    """Whether the rank's training thread holds the GIL as a culprit that holds it does: a
    process stopped (SIGSTOP, a debugger) froze with the GIL it had, and the stop is the news."""
    stopped = look is not None and look.stopped
    return thread is not None and thread.owns_gil and not stopped


def _asleep(before: tuple[float, int], now: tuple[float, int]) -> bool:
    """The main thread neither ran nor woke between two looks (a thread in a loop that polls
    with a timeout wakes a few times a second at most)."""
    return now[0] - before[0] <= ASLEEP_CPU and now[1] - before[1] <= ASLEEP_WAKES


def _peer(thread: Sampled) -> int | None:
    """The peer the innermost send or receive of ``thread`` names; :data:`~distmon.wire.ANY_SOURCE`
    for a receive from anyone."""
    for frame, args in zip(reversed(thread.frames), reversed(thread.args), strict=True):
        name = P2P_ARGS.get(frame.func) if frame.file.endswith(C10D) else None
        if name is not None:
            value = args.get(name, "").strip()
            return int(value) if value.lstrip("-").isdigit() else ANY_SOURCE if value == "None" else None
    return None


def _worker_id(thread: Sampled | None) -> int | None:
    if thread is None:
        return None
    for frame, args in zip(thread.frames, thread.args, strict=True):
        if frame.file.endswith(WORKER_LOOP) and args.get("worker_id", "").isdigit():
            return int(args["worker_id"])
    return None


def _waits_for_work(stack: list[StackFrame]) -> bool:
    """A DataLoader worker between batches: in its loop, waiting on its index queue."""
    inner = next((i for i, f in enumerate(stack) if f.file.endswith(WORKER_LOOP)), None)
    return inner is not None and any(f.func == "get" and f.file.endswith("queues.py") for f in stack[inner + 1 :])


def _usage(w: _Watched, look: proc.Sample, t: float) -> Usage | None:
    """What the process did over the last :data:`USAGE_WINDOW` seconds of looks."""
    w.usage.append((t, look.cpu, look.read, look.written))
    while len(w.usage) > 2 and t - w.usage[1][0] >= USAGE_WINDOW:
        w.usage.popleft()
    first = w.usage[0]
    if t - first[0] <= 0:
        return None
    return Usage(t - first[0], max(0.0, look.cpu - first[1]), max(0, look.read - first[2]),
                 max(0, look.written - first[3]))  # fmt: skip
