"""Whether the monitor keeps up with what the ranks send, judged from its own state.

A monitor that takes in fewer reports than the ranks send drops the oldest (its intake's
caps, :class:`distmon.monitor.intake.feeds.LiveFeed`, counted under :data:`OVERFLOW`), or takes them
in late. Either way ranks look silent that are not: their reports were lost or are still
queued. Or the monitor itself stood still: its process stopped (SIGSTOP, a suspended VM, a
swapping login node) or its clock jumped, and it did not watch the seconds in between
(:class:`distmon.monitor.session.Session` notices, counted in seconds under
:data:`~distmon.monitor.state.unwatched.PAUSED` and :data:`~distmon.monitor.state.unwatched.JUMPED`).
:class:`KeepingUp` says when that is so, until every rank has had time to report again; the
rules then name no rank for its silence (:mod:`distmon.monitor.rules.monitor_behind`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distmon.monitor.state import JobState
from distmon.monitor.state.limits import Thresholds
from distmon.monitor.state.unwatched import JUMPED, PAUSED
from distmon.monitor.state.words import duration
from distmon.wire.sockets import RELAY_DROPPED

OVERFLOW = "overflow"
"""The reason the monitor's own intake drops reports under (the oldest, past its caps)."""
MAX_RELAYS_SHOWN = 4
"""Relays named where reports were dropped; the rest are counted."""
DROPS = (OVERFLOW, RELAY_DROPPED)
"""Reports the monitor lost, as its state counts them."""
LOSSES = (*DROPS, PAUSED, JUMPED)
"""What the monitor lost: reports, then seconds it did not watch."""
CATCH_UP_INTERVALS = 2.0
"""Report intervals, once reports come in again after the last drop, by which every rank
has reported again."""


@dataclass(frozen=True)
class Behind:
    summary: str
    """One plain line, the same for as long as it lasts."""
    detail: str
    offset: float = 0.0
    """The ranks' clocks against the monitor's when it keeps up (skew and transport): a
    report whose ``t`` is older than that by more than its intervals was taken in late."""
    away: bool = False
    """Only because it did not watch for a while (its loop stood still, its clock jumped): it
    keeps up otherwise."""
    on_the_way: bool = False
    """Reports were lost by relays on the way (their upstream slow), none by the monitor itself."""


class KeepingUp:
    """What the monitor's own intake lost, tick after tick. Drops reach the state as the
    recording's ``d`` records do, so a replay sees them at the same ticks."""

    def __init__(self) -> None:
        self._counted: dict[str, int] = dict.fromkeys(LOSSES, 0)
        """Each loss as the state counted it at the last tick."""
        self._dropped_at: float | None = None
        """When the monitor last learned of a drop. It learns of them when its loop takes
        from the intake, which may be after a pause: the ticks of the paused seconds run
        then, with the reports of those seconds lost."""
        self._heard_at: float | None = None
        """When reports that arrived after that drop were first taken in."""
        self._since: float | None = None
        """When it fell behind."""
        self._calm_since: float | None = None
        """Since when neither drops nor late reports have been seen."""
        self._offset: float | None = None
        """The least the reports of a tick have been behind the monitor's clock: the clocks'
        skew and the transport, not lateness."""
        self._lost: dict[str, int] = dict.fromkeys(LOSSES, 0)
        """Each loss since the monitor fell behind: reports dropped (by its own intake, by
        relays on the way), seconds it did not watch (its loop stood still, its clock jumped)."""

    def behind(self, job: JobState, now: float, interval: float, limits: Thresholds) -> Behind | None:
        """Why the monitor is behind now; None once it has caught up: reports taken in
        again after its last drop, none of them late, for :data:`CATCH_UP_INTERVALS`."""
        for why in LOSSES:
            counted = (job.dropped if why in DROPS else job.unwatched).get(why, 0)
            if counted > self._counted[why]:
                self._fell_behind(now)
                self._lost[why] += counted - self._counted[why]
            self._counted[why] = counted
        late = self._lateness(job, now, limits.silent_after(interval))
        if self._dropped_at is not None and self._heard_at is None:
            heard = job.cols.received[job.cols.present]
            if len(heard) and float(heard.max()) > self._dropped_at:
                self._heard_at = now
        troubled = late is not None or (self._dropped_at is not None and self._heard_at is None)
        if troubled:
            self._calm_since = None
            if self._since is None:
                self._since, self._lost = now, dict.fromkeys(LOSSES, 0)
        elif self._since is None:
            return None
        else:
            calm = self._calm_since if self._calm_since is not None else now
            if self._heard_at is not None:
                calm = max(calm, self._heard_at)
            self._calm_since = calm
            if now - calm >= CATCH_UP_INTERVALS * interval + 1.0:
                self._since = self._dropped_at = self._heard_at = self._calm_since = None
                return None
        facts = []
        if self._lost[OVERFLOW]:
            facts.append(f"it has dropped {self._lost[OVERFLOW]:,} reports in {duration(now - self._since)}")
        if self._lost[RELAY_DROPPED]:
            by = _relays(job)
            facts.append(
                f"relays on the way dropped {self._lost[RELAY_DROPPED]:,} reports in {duration(now - self._since)}, "
                f"their upstream slow{f': {by}' if by else ''}"
            )
        if self._lost[PAUSED]:
            facts.append(
                f"its own loop did not run for {duration(self._lost[PAUSED])} (its process was stopped, "
                "or starved of CPU): it did not watch those seconds"
            )
        if self._lost[JUMPED]:
            facts.append(f"its clock jumped by {duration(self._lost[JUMPED])} while it ran")
        if late is not None:
            facts.append(f"the reports it takes in were sent {duration(late)} earlier")
        away = not self._lost[OVERFLOW] and not self._lost[RELAY_DROPPED] and late is None
        on_the_way = bool(self._lost[RELAY_DROPPED]) and not self._lost[OVERFLOW]
        return Behind(self._summary(), "; ".join(facts), self._offset or 0.0, away, on_the_way)

    def _fell_behind(self, now: float) -> None:
        """It learned of a loss (drops, or seconds it did not watch): behind until reports
        arrive after it, on time."""
        if self._since is None:
            self._since, self._lost = now, dict.fromkeys(LOSSES, 0)
        self._dropped_at, self._heard_at = now, None

    def _summary(self) -> str:
        """One plain line, the same for as long as it lasts: its own pause, unless it also
        dropped reports (the more to act on)."""
        if self._lost[OVERFLOW]:
            return "the monitor is behind: it drops reports it cannot take in; it names no rank for the silence"
        if self._lost[RELAY_DROPPED]:
            return "relays drop reports on the way to the monitor; it names no rank for the silence"
        if self._lost[PAUSED] or self._lost[JUMPED]:
            what = "its own loop stood still" if self._lost[PAUSED] else "its clock jumped"
            return f"the monitor did not watch for a while ({what}); it names no rank for a silence it did not see"
        return "the monitor is behind: it takes reports in late; it names no rank for the silence"

    def _lateness(self, job: JobState, now: float, silent_after: float) -> float | None:
        """How late the reports taken in during the last second arrived, beyond the least
        ever seen (clocks differ between hosts), when that is late enough to make a rank
        look silent; the median: a few ranks' clocks may be off."""
        c = job.cols
        recent = c.present & (c.received >= now - 1.0)
        if not recent.any():
            return None
        offset = float(np.median(c.received[recent] - c.t[recent]))
        self._offset = offset if self._offset is None else min(self._offset, offset)
        late = offset - self._offset
        return late if late >= silent_after / 2 else None


def _relays(job: JobState) -> str:
    """The relays that dropped reports, by host, the most first."""
    relays = job.lost_on_the_way.most_common()
    hosts = ", ".join(f"{host} ({n:,})" for host, n in relays[:MAX_RELAYS_SHOWN])
    return hosts + (f" and {len(relays) - MAX_RELAYS_SHOWN} more" if len(relays) > MAX_RELAYS_SHOWN else "")
