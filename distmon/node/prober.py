"""Looks at processes through /proc on a thread of its own: the eye's hands.

Reading /proc is I/O and a process may be stuck in the kernel, so neither a relay's loop nor
the monitor's ever reads it: they ask (:meth:`Prober.ask`) and take what was seen since
(:meth:`Prober.take`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from distmon.node.proc import Sample, command_name, look, started

PERIOD = 1.0
"""Seconds between two looks at a process asked about now and then."""
CLOSE_PERIOD = 0.25
"""Seconds between two looks at a process asked about in the last :data:`CLOSE_FOR` seconds (a
rank the others wait for): what it does over a second is then told by four looks that must
agree, not by one that may catch an instant."""
CLOSE_FOR = 2.0
FORGET = 30.0
"""A process not asked about for this long is no longer looked at."""
MAX_WATCHED = 256
"""Processes looked at, at most: those asked about most recently."""
MAX_SEEN = 4096
"""Looks held for the next :meth:`Prober.take`, at most: the latest."""
WATCH_PERIOD = 0.1
"""Seconds between two checks that a process watched for its end (:meth:`Prober.watch`) lives."""
MAX_ENDS_WATCHED = 4096
"""Processes watched for their end, at most: a node's ranks."""


def by_py_spy(sample: Sample) -> bool:
    """The look caught the process held by a py-spy taking its stack (state ``t``, py-spy its
    tracer): what it shows is that look, not the process; it is not kept (a rank named "stopped
    by a debugger" for a stack distmon took)."""
    return sample.state == "t" and bool(sample.tracer) and command_name(sample.tracer) == "py-spy"


def gone_sample(pid: int, t: float) -> Sample:
    """What a look at a process that no longer exists records: state ``X`` (dead)."""
    return Sample(pid, t, "X")


class Prober:
    """Looks at each process asked about in the last :data:`FORGET` seconds, every
    :data:`PERIOD` (every :data:`CLOSE_PERIOD` while it is asked about often), on a thread
    started by the first :meth:`ask`; a process found gone is looked at no more unless asked
    again."""

    def __init__(self, period: float = PERIOD) -> None:
        self._period = period
        self._asked: dict[int, float] = {}
        self._due: dict[int, float] = {}
        self._threads: dict[int, tuple[int | None, int | None]] = {}
        """The threads to look at in a process, by native id: the one that trains (where it
        is not the main one), and distmon's reporting thread."""
        self._seen: list[Sample] = []
        self._ends: dict[int, tuple[float, int | None]] = {}
        """Processes watched for their end: when last told to, and when each started (None
        before it was first seen alive)."""
        self._ends_due = 0.0
        self._ends_checked = 0.0
        """When the last check of the processes watched for their end that is over began
        (monotonic)."""
        self._unseen: dict[int, float] = {}
        """Processes told to watch that were not there at the first check (another pid
        namespace's, or gone already), and when: not watched again for :data:`FORGET`."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def ask(self, processes: list[tuple[int, int | None, int | None]]) -> None:
        """Look at each ``(pid, tid, reporter)`` from now on (at its thread ``tid`` where
        given, the thread that trains; at how often its thread ``reporter`` wakes), closely for
        :data:`CLOSE_FOR` seconds: at once where it was not looked at closely already."""
        now = time.monotonic()
        with self._lock:
            for pid, tid, reporter in processes:
                if now - self._asked.get(pid, -CLOSE_FOR) >= CLOSE_FOR:
                    self._due[pid] = min(self._due.get(pid, now), now)
                self._asked[pid] = now
                if tid is not None or reporter is not None:
                    self._threads[pid] = (tid, reporter)
            while len(self._asked) > MAX_WATCHED:
                self._forget(min(self._asked, key=self._asked.__getitem__))
            if processes:
                self._start()
        self._wake.set()

    def watch(self, pids: Iterable[int]) -> None:
        """Tell when each of ``pids`` ends, within :data:`WATCH_PERIOD` (a look saying it is gone:
        :func:`gone_sample`), from now on and while told so within :data:`FORGET`: the ranks that report
        on this node, so that one that dies without a word is known dead at once. Cheap: one
        small file a process. A process never seen alive is never told gone (it may live where
        this node's /proc does not see it), nor one whose pid another process took since."""
        now = time.monotonic()
        with self._lock:
            for pid in pids:
                unseen = self._unseen.get(pid)
                if unseen is not None and now - unseen < FORGET:
                    continue
                if pid not in self._ends and len(self._ends) < MAX_ENDS_WATCHED:
                    self._ends_due = 0.0  # seen alive at once: a rank killed a tenth of a second on is told gone
                if pid in self._ends or len(self._ends) < MAX_ENDS_WATCHED:
                    self._ends[pid] = (now, self._ends.get(pid, (now, None))[1])
            self._start()
        self._wake.set()

    def check_ends(self, timeout: float) -> None:
        """Check at once whether each process watched for its end lives, and return once the
        thread has (at most ``timeout`` seconds later): a monitor stopping takes in, with the
        ranks' last words, the ends of those that died without any."""
        asked = time.monotonic()
        with self._lock:
            if not self._ends:
                return
            self._ends_due = 0.0
        self._wake.set()
        while self._ends_checked < asked and time.monotonic() - asked < timeout:
            time.sleep(0.01)

    def unwatch(self, pids: Iterable[int]) -> None:
        """Watch ``pids`` for their end no more (they said their last words)."""
        with self._lock:
            for pid in pids:
                self._ends.pop(pid, None)

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="distmon-probe", daemon=True)
            self._thread.start()

    def take(self) -> list[Sample]:
        """The looks taken since the last call, oldest first (a process gone: :func:`gone_sample`)."""
        with self._lock:
            seen, self._seen = self._seen, []
            return seen

    def _forget(self, pid: int) -> None:
        self._asked.pop(pid, None)
        self._due.pop(pid, None)
        self._threads.pop(pid, None)

    def _run(self) -> None:
        while True:
            now = time.monotonic()
            if now >= self._ends_due:
                self._check_ends(now)
            with self._lock:
                for pid in [p for p, t in self._asked.items() if now - t > FORGET]:
                    self._forget(pid)
                due = [p for p in self._asked if self._due.get(p, 0.0) <= now]
                soonest = min((self._due.get(p, 0.0) for p in self._asked), default=now + self._period)
                if self._ends:
                    soonest = min(soonest, self._ends_due)
            if not due:
                self._wake.wait(min(max(0.0, soonest - now), self._period))
                self._wake.clear()
                continue
            for pid in due:
                t = time.monotonic()
                sample = look(pid, t, *self._threads.get(pid, (None, None))) or gone_sample(pid, t)
                with self._lock:
                    close = time.monotonic() - self._asked.get(pid, 0.0) < CLOSE_FOR
                    self._due[pid] = time.monotonic() + (min(CLOSE_PERIOD, self._period) if close else self._period)
                    if sample.state == "X":  # gone stays gone: a pid reused is another process
                        self._forget(pid)
                    if not by_py_spy(sample):
                        self._seen.append(sample)
                        del self._seen[:-MAX_SEEN]

    def _check_ends(self, now: float) -> None:
        """Whether each process watched for its end still lives (:meth:`watch`)."""
        self._ends_due = now + WATCH_PERIOD
        with self._lock:
            for pid in [p for p, (told, _) in self._ends.items() if now - told > FORGET]:
                del self._ends[pid]
            for pid in [p for p, t in self._unseen.items() if now - t > FORGET]:
                del self._unseen[pid]
            watched = list(self._ends.items())
        for pid, (_, began) in watched:
            now_began = started(pid)
            if began is not None and now_began == began:
                continue
            with self._lock:
                if pid not in self._ends:
                    continue  # unwatched meanwhile
                if began is None and now_began is not None:
                    self._ends[pid] = (self._ends[pid][0], now_began)  # seen alive: from now on its end is told
                    continue
                del self._ends[pid]
                if began is None:
                    if len(self._unseen) < MAX_ENDS_WATCHED:
                        self._unseen[pid] = now
                else:
                    self._seen.append(gone_sample(pid, time.monotonic()))
                    del self._seen[:-MAX_SEEN]
        self._ends_checked = now
