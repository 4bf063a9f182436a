"""What every rule shares: the thresholds and the context of one evaluation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from distmon.monitor.alerts import Finding
from distmon.monitor.state import JobState
from distmon.pyspy import OutsideStack

Probe = Callable[[str, int], "str | None"]
"""(host, pid) -> "alive", "gone", or None when the monitor cannot tell (another host)."""
StackSource = Callable[..., "OutsideStack | None"]
"""(host, pid, since when it is stuck, take=True) -> its stack from outside, None while being
taken; with ``take`` False, only a stack taken before (the process may be gone since)."""


@dataclass(frozen=True)
class Thresholds:
    lost_floor: float = 5.0
    """A rank is lost after this many seconds of silence, or four report intervals."""
    hang_floor: float = 5.0
    """A collective in flight this long, and ``hang_steps`` step times, is a hang."""
    hang_steps: float = 5.0
    startup_hang: float = 30.0
    """Before the job's first step, collectives wait for slow starters this long."""
    stall_floor: float = 10.0
    """With no collective in flight, a job stalled this long (and ``hang_steps`` step times) is stuck."""
    straggler_wait_ratio: float = 0.25
    straggler_min_peer_wait: float = 0.35
    straggler_data_wait: float = 0.25
    straggler_min_samples: int = 10
    memory_near_limit: float = 0.95
    growth_window: int = 20
    """Reports over which memory must keep growing to be called a leak."""
    growth_min_bytes: float = 256 * 1024**2
    growth_min_ratio: float = 0.05


@dataclass
class Context:
    """What every rule needs besides the state: the time, the job's pace, the probe."""

    now: float
    pace: float | None
    """The job's median step time, or None before any rank has stepped."""
    probe: Probe | None
    limits: Thresholds
    stacks: StackSource | None = None

    @property
    def hang_after(self) -> float:
        if self.pace is None:
            return self.limits.startup_hang
        return max(self.limits.hang_floor, self.limits.hang_steps * self.pace)


Rule = Callable[[JobState, Context], list[Finding]]
