"""How long is too long: every threshold the monitor judges by, in one place.

Thresholds follow the job's own pace (its median step time) above fixed floors, so a
20 ms step and a 2 s step are judged alike and a healthy job raises nothing. The detector's
rules, the job's state word in the terminal UI and the reports all read them here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import overload

import numpy as np

from distmon import wire
from distmon.monitor.state.columns import F8

PAUSE_STEPS = wire.PAUSE_STEPS
"""A step, or a wait in a collective, that a rank's own report shows lasting longer than this
many of its step times is a pause: the job stood still for a rank (a habit, or a hang), the
business of the hang rule and the job's routine, for the rank that takes it as for those
waiting. A shorter one, however often it comes, is the job's pace: a rank the others wait for
in every step, or every other one, is a straggler. The ranks count their pace so too
(:class:`~distmon.wire.Pace`)."""


@overload
def pause_after(step_time: float) -> float: ...
@overload
def pause_after(step_time: F8) -> F8: ...
def pause_after(step_time: float | F8) -> float | F8:
    """Given a step time (or an array of them; NaN: none yet), how long a step or a wait must
    have lasted, by the rank's own report, to be a pause (:data:`PAUSE_STEPS`)."""
    return PAUSE_STEPS * step_time


@dataclass(frozen=True)
class Thresholds:
    silence_floor: float = 5.0
    """A rank is silent after this many seconds without a report, or ``silence_intervals``
    of its own report intervals if longer."""
    silence_intervals: float = 4.0
    overdue_intervals: float = 2.0
    """A rank not heard from for this many of its report intervals is overdue: what its last
    report said it was doing may be over (it stopped reporting before it was silent)."""
    hang_floor: float = 5.0
    """A collective or send in flight this long, and ``hang_steps`` step times, is a hang."""
    hang_steps: float = 5.0
    hang_intervals: float = 2.0
    """And this many of the ranks' report intervals: with ``DISTMON_INTERVAL=8`` at scale, a
    rank not heard from since others began to wait has not said whether it waits too."""
    early_floor: float = 1.0
    """A rank the others have waited for this long (and ``early_steps`` step times), seen
    from outside doing nothing for a second (stopped, asleep, blocked in the kernel, on a
    lock), is named then, as a warning; critical follows at ``hang_after``. It is looked at
    from half that."""
    early_steps: float = 3.0
    init_wait: float = 10.0
    """Ranks waiting this long in ``init_process_group`` for ranks elsewhere that do nothing
    (seen from outside), or that never reported, name those as a warning; critical follows
    at ``startup_hang``. A rank that works (an import, a JIT build) waits for that, as before."""
    startup_hang: float = 30.0
    """Before the job's first step, collectives wait for slow starters this long."""
    stall_floor: float = 10.0
    """With nothing in flight, a job stalled this long (and ``hang_steps`` step times) is stuck."""
    near_timeout: float = 0.25
    """A culprit that works (a checkpoint, an evaluation) is a warning until this share of
    the collective timeout is left."""
    hung_after: float = 60.0
    """A job without progress whose oldest collective has waited this long is hung, whatever
    the rules have said yet."""
    straggler_sure: float = 5.0
    """A rank that holds its peers up (:mod:`distmon.monitor.state.pace`) is a straggler once
    that hold-up is this many standard errors sure (more among more than eight ranks: the
    largest of their chance deviations grows with them) ..."""
    straggler_cost: float = 0.03
    """... and costs the job this share of its time or more ..."""
    straggler_still: float = 3.0
    """... and stays one while it is this sure and holds its peers up at all: one alert, however
    its hold-up comes and goes around the line."""
    memory_near_limit: float = 0.95
    growth_window: int = 20
    """Reports over which memory must keep growing to be called a leak."""
    growth_min_bytes: float = 256 * 1024**2
    growth_min_ratio: float = 0.05

    @overload
    def silent_after(self, interval: float) -> float: ...
    @overload
    def silent_after(self, interval: F8) -> F8: ...
    def silent_after(self, interval: float | F8) -> float | F8:
        """Given a rank's report interval (or an array of them): how long without a report
        makes it silent. The one definition: :meth:`JobState.silent` and every reader use it."""
        after: float | F8 = np.maximum(self.silence_floor, self.silence_intervals * interval)
        return after

    @overload
    def overdue_after(self, interval: float) -> float: ...
    @overload
    def overdue_after(self, interval: F8) -> F8: ...
    def overdue_after(self, interval: float | F8) -> float | F8:
        """Given a rank's report interval (or an array of them): how long without a report
        makes it overdue (:attr:`overdue_intervals`); silent comes later (:meth:`silent_after`)."""
        return self.overdue_intervals * interval

    def hang_after(self, pace: float | None, interval: float = 1.0) -> float:
        """``pace`` is the job's median step time, None before any rank has stepped;
        ``interval`` the ranks' report interval."""
        if pace is None:
            return max(self.startup_hang, self.hang_intervals * interval)
        return max(self.hang_floor, self.hang_steps * pace, self.hang_intervals * interval)

    def early_after(self, pace: float | None) -> float:
        """When a wait is long enough to name, as a warning, the rank it waits for if that
        rank does nothing; never before the job's first step (start-ups are slow)."""
        if pace is None:
            return math.inf
        return max(self.early_floor, self.early_steps * pace)

    def progress_after(self, pace: float | None) -> float:
        """A job that has not progressed for this long shows as stalled, even at start-up."""
        return max(self.hang_floor, self.hang_steps * (pace or 0.0))

    def stall_alert_after(self, pace: float | None) -> float:
        """How long a job stalled with nothing in flight waits before the stall rule names it
        (a rank says it is stalled far sooner: :func:`distmon.wire.stall_after`)."""
        if pace is None:
            return self.startup_hang
        return max(self.stall_floor, self.hang_steps * pace)


LIMITS = Thresholds()
"""The defaults, for views that have no detector of their own (a report, a replay)."""
