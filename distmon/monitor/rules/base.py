"""What every rule shares: the context of one evaluation (the thresholds are
:mod:`distmon.monitor.state.limits`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from distmon.monitor.outside.sight import Seen
from distmon.monitor.outside.verdicts import Verdict
from distmon.monitor.rules.keeping_up import Behind
from distmon.monitor.rules.routine import Routine
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import Finding
from distmon.monitor.state.limits import Thresholds
from distmon.node.pyspy import OutsideStack

Probe = Callable[[str, int], "str | None"]
"""(host, pid) -> "alive", "gone", or None when the monitor cannot tell (no eye on that node,
or none has looked yet): :meth:`distmon.monitor.outside.sight.Sight.state`."""
StackSource = Callable[..., "OutsideStack | None"]
"""(host, pid, since when it is stuck, take=True) -> its stack from outside, None while being
taken; with ``take`` False, only a stack taken before (the process may be gone since)."""
Ended = Callable[[float], "list[tuple[str, int, float]]"]
"""(since) -> the processes their eyes told gone since then, with when (the monitor's clock):
:meth:`distmon.monitor.outside.sight.Sight.ended`."""
Outside = Callable[[str, int], "Seen | None"]
"""(host, pid) -> its node's eye's looks at it (:meth:`distmon.monitor.outside.sight.Sight.view`),
None where no eye watches that node, or before its first look."""


@dataclass
class Context:
    """What every rule needs besides the state: the time, the job's pace, the probe."""

    now: float
    pace: float | None
    """The job's median step time, or None before any rank has stepped."""
    probe: Probe | None
    limits: Thresholds
    stacks: StackSource | None = None
    interval: float = 1.0
    """The ranks' longest report interval."""
    outside: Outside | None = None
    behind: Behind | None = None
    """Why the monitor itself is behind (it drops reports, or takes them in late); None
    while it keeps up. Silence it caused names no rank."""
    named_early: dict[int, Verdict] = field(default_factory=dict)
    """Ranks named before the thresholds for doing nothing, with what they were seen doing:
    the detector's memory from tick to tick, kept while an alert names them."""
    routine: Routine = field(default_factory=Routine)
    """The job's routine pauses, learned from tick to tick (the detector's memory too)."""
    standing: frozenset[str] = frozenset()
    """The keys of the findings of the tick before: a rule may hold what it named to a lower
    bar than it names by, so that what stands near its line is one alert."""
    ended: Ended | None = None
    """The processes the nodes' eyes saw end, where any eye has spoken."""
    drops: dict[tuple[str, str, float], bool | None] = field(default_factory=dict)
    """Whether the job stood still over each drop of a node's link (host, link, when it went),
    judged once when it was told, while the ranks' histories hold it (the detector's memory)."""
    seen_waiting: dict[int, float] = field(default_factory=dict)
    """Ranks found from outside seen standing in a wait at their peers, and when last: one seen
    moving on from it catches up (the detector's memory, a hooked rank's being its reports')."""

    @property
    def hang_after(self) -> float:
        return self.limits.hang_after(self.pace, self.interval)

    @property
    def early_after(self) -> float:
        return self.limits.early_after(self.pace)

    @property
    def looked_after(self) -> float:
        """Waits this long have the ranks they wait for looked at from outside."""
        return min(self.hang_after, self.early_after / 2)


Rule = Callable[[JobState, Context], list[Finding]]
"""A rule: what it finds in the job's state, in the context of one tick; it may add to the
detector's memory there (:attr:`Context.named_early`, :attr:`Context.routine`,
:attr:`Context.drops`, :attr:`Context.seen_waiting`)."""
