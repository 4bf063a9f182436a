"""What the nodes' eyes saw of the job's processes, as the rules read it.

Every node's eye (:mod:`distmon.node`: a relay's for its node, the monitor's own for its host)
hands its looks over as data, taken in here at the time they came, live or replayed
(:meth:`Sight.saw`). The rules ask about a process by host and pid (:meth:`Sight.view`,
:meth:`Sight.state`, :meth:`Sight.stack`): the answer is what its node's eye has said by then,
None where no eye watches that node, and the asking is kept, for the monitor to send to the
eyes after the tick (:meth:`Sight.wanted`): the first question about a process starts its
eye looking. The monitor's host is a node like any other.

It changes only as looks are taken in, on the monitor's thread: a tick reads one consistent
sight, and a replay, fed the same looks at the same times, reads the same one.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass

from distmon.monitor.state.nodes import EyesTold
from distmon.node.looks import Looks, Wanted
from distmon.node.proc import Sample
from distmon.node.pyspy import OutsideStack

ALIVE = "alive"
GONE = "gone"
WINDOW = 40
"""Looks kept per process: progress is judged over the last ten seconds or so."""
SPAN = 1.0
"""Seconds of looks that tell what a process does now (:attr:`Seen.recent`)."""
AGREED = 0.75
"""Seconds of looks that must agree to tell that a process does nothing: four looks of a
process looked at closely (:data:`distmon.node.prober.CLOSE_PERIOD` apart), so that looks begun
after one tick of the monitor are judged at the next."""
MAX_PROCESSES = 4096
"""Processes whose looks are kept: those looked at most recently."""
MAX_STACKS = 256


@dataclass(frozen=True)
class Seen:
    """What a node's eye saw of a process: the oldest look kept and the latest (None once it
    is gone)."""

    first: Sample | None
    """None for a process already gone at the first look."""
    last: Sample | None
    recent: Sample | None = None
    """The newest look at least :data:`SPAN` before ``last``: what it did over the last second
    or so, whatever it did before."""
    looks: tuple[Sample, ...] = ()
    """Every look kept, oldest first, ``last`` included while the process lives."""
    now: float | None = None
    """The monitor's time of this view on the eye's clock (the looks' times), where known:
    the latest look may be a batch old."""

    def within(self, seconds: float) -> tuple[Sample, ...]:
        """The looks of the last ``seconds`` (by the eye's clock, up to now, else up to ``last``)."""
        kept = self.looks or tuple(s for s in (self.first, self.recent, self.last) if s is not None)
        if self.last is None:
            return ()
        until = self.now if self.now is not None else self.last.t
        return tuple(s for s in kept if until - s.t <= seconds)


Process = tuple[str, int]


class Sight:
    def __init__(self, told: EyesTold | None = None) -> None:
        self.told = told or EyesTold()
        """What the eyes told of their nodes, as the job keeps it (the job's state's, where
        given: :attr:`distmon.monitor.state.job.JobState.told`): which have spoken, their
        links, the processes they saw end."""
        self._looks: OrderedDict[Process, deque[Sample]] = OrderedDict()
        self._blind: set[str] = set()
        """The nodes whose eye is lost (:meth:`blind`)."""
        self._stacks: OrderedDict[tuple[str, int, float], OutsideStack] = OrderedDict()
        self._asked: dict[Process, float | None] = {}
        """Processes asked about since :meth:`wanted` last ran, with a stack's stall if one was asked for."""
        self._stopped: set[Process] = set()
        self._offsets: dict[str, float] = {}
        """Per node, the monitor's time less its eye's clock: the least seen, when a look
        came (the least delay on the way is the truest)."""
        self.now: float | None = None
        """The monitor's time of the tick the rules run in (set by the monitor)."""

    def saw(self, looks: list[Looks], t: float) -> list[Looks]:
        """Take in what the eyes say, come at ``t``; returns what is new (a node's first word,
        or looks), for the recording."""
        new = []
        for one in looks:
            first = self.told.spoke(one.host)
            self.told.fared(one.reached, t)
            times = [sample.t for sample in one.samples] + ([one.read] if one.read is not None else [])
            if times:
                offset = t - max(times)
                self._offsets[one.host] = min(offset, self._offsets.get(one.host, offset))
            if one.links is not None:
                read = t if one.read is None else one.read + self._offsets[one.host]
                self.told.read_links(one.host, one.links, read)
            for sample in one.samples:
                self._take(one.host, sample, t)
            for taken in one.stacks:
                self._stacks[(one.host, taken.pid, taken.since)] = taken.stack
                while len(self._stacks) > MAX_STACKS:
                    self._stacks.popitem(last=False)
            if first or one:
                new.append(one)
        return new

    def _take(self, host: str, sample: Sample, t: float) -> None:
        key = (host, sample.pid)
        if key in self.told.gone:
            return  # gone stays gone: a pid reused is another process
        kept = self._looks.get(key)
        if kept is None:
            kept = self._looks[key] = deque(maxlen=WINDOW)
            while len(self._looks) > MAX_PROCESSES:
                self._looks.popitem(last=False)
        if kept and sample.t < kept[-1].t:
            return  # older than what its eye said before: out of order on the way
        if kept and kept[-1].tid != sample.tid:
            kept.clear()  # another thread looked at (the one that trains, once known): its counters are its own
        kept.append(sample)
        self._looks.move_to_end(key)
        if sample.state == "X":
            self.told.saw_end(host, sample.pid, t)

    def blind(self, hosts: set[str]) -> None:
        """The nodes whose eye is lost as of this tick (their relay silent:
        :meth:`~distmon.monitor.state.job.JobState.blind_hosts`). What it saw before is no
        evidence after: its looks and stacks are forgotten, and until it is heard again it is
        asked nothing and answers nothing, as a node without an eye. That a process was seen
        gone stays."""
        for host in hosts - self._blind:
            for key in [key for key in self._looks if key[0] == host]:
                del self._looks[key]
            for stack in [stack for stack in self._stacks if stack[0] == host]:
                del self._stacks[stack]
        self._blind = hosts

    @property
    def eyes(self) -> Mapping[str, None]:
        """The nodes whose eye has spoken (:attr:`EyesTold.eyes`)."""
        return self.told.eyes

    def watched(self, host: str) -> bool:
        """Whether an eye watches ``host`` now: the monitor's own, or a relay's there that is
        heard."""
        return host in self.told.eyes and host not in self._blind

    def ended(self, after: float) -> list[tuple[str, int, float]]:
        """The processes whose eye told they were gone at ``after`` or since (the monitor's
        clock): host, pid and when, the latest first."""
        return self.told.ended_since(after)

    def _kept(self, host: str, pid: int) -> deque[Sample] | None:
        """The looks kept at the process, None before the first or where no eye watches its
        node; the asking noted, for its eye to look (:meth:`wanted`)."""
        if not self.watched(host):
            return None
        self._asked.setdefault((host, pid), None)
        return self._looks.get((host, pid)) or None

    def state(self, host: str, pid: int) -> str | None:
        """``alive`` or ``gone`` as its node's eye last saw the process; None before its first
        look, or where no eye watches the node (asking starts it looking)."""
        if (host, pid) in self.told.gone and self.watched(host):
            return GONE
        return None if self._kept(host, pid) is None else ALIVE

    def view(self, host: str, pid: int) -> Seen | None:
        """The looks at the process so far; None where no eye watches its node, or before the
        first look (asking starts it looking)."""
        kept = self._kept(host, pid)
        if kept is None:
            return None
        gone = (host, pid) in self.told.gone
        alive = tuple(s for s in kept if s.state != "X")
        last = None if gone else kept[-1]
        recent = next((s for s in reversed(alive) if last is not None and last.t - s.t >= SPAN), None)
        offset = self._offsets.get(host)
        now = None if offset is None or self.now is None else self.now - offset
        return Seen(alive[0] if alive else None, last, recent, alive, now)

    def stack(self, host: str, pid: int, since: float, take: bool = True) -> OutsideStack | None:
        """The process's stack taken from outside on its node for the stall that began at
        ``since``; None while it is being taken (asking starts it, once its eye has looked at
        the process, which tells whether it is stopped); with ``take`` False, only one taken
        before. Where no eye watches the node, why not."""
        if host in self._blind:
            return OutsideStack(
                error=f"the eye on {host} is lost (its distmon relay fell silent): run "
                f"`py-spy dump --native --pid {pid}` there"
            )
        if host not in self.told.eyes:
            return OutsideStack(
                error=f"no distmon relay runs on {host}: run `py-spy dump --native --pid {pid}` there, "
                "or a relay per node (docs/deployment.md)"
            )
        taken = self._stacks.get((host, pid, since))
        if taken is not None or not take:
            return taken
        seen = self.view(host, pid)
        if seen is None:
            return None  # the first look tells how to take its stack
        if seen.last is not None:
            self._asked[(host, pid)] = since
            if seen.last.stopped:
                self._stopped.add((host, pid))
        return None

    def wanted(self) -> list[Wanted]:
        """What the rules asked about since the last call, for the eyes."""
        asked, self._asked = self._asked, {}
        stopped, self._stopped = self._stopped, set()
        return [Wanted(host, pid, since, (host, pid) in stopped) for (host, pid), since in asked.items()]
