"""The monitor of a screen attached to a live one (``distmon watch --attach``): it follows
the other's verdicts and judges nothing itself. It is no :class:`~distmon.monitor.pipeline.Monitor`
(no detector, sight of processes, alerts of its own or recording): both are driven and shown
as a :class:`~distmon.monitor.pipeline.Monitoring`."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from distmon.monitor.attach.messages import CatchUp, Tick
from distmon.monitor.outside.sight import Sight
from distmon.monitor.pipeline import take_looks
from distmon.monitor.recording.format import AlertEvent
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import AlertBook, Change
from distmon.monitor.state.limits import Thresholds
from distmon.wire.column_batch import Incoming
from distmon.wire.sockets import Command


class Telling(Protocol):
    """What a monitor tells the screens attached to it, besides its reports, in order
    (:class:`distmon.monitor.attach.feed.AttachedFeed`)."""

    def take_told(self) -> list[CatchUp | AlertEvent | Tick]: ...


class AttachedMonitor:
    """The monitor of a screen attached to another (``distmon watch --attach``): it judges
    nothing itself. It takes in the reports that monitor admitted, as it received them (through
    the one driver, :class:`distmon.monitor.session.Session`), and what its nodes' eyes saw,
    and keeps the alerts that monitor raised, with what their ranks do, as ``source`` hands them
    over: it has neither the prober nor py-spy of the job's hosts, runs no detector and asks
    the ranks nothing."""

    def __init__(self, source: Telling, limits: Thresholds | None = None) -> None:
        self.source = source
        self.limits = limits or Thresholds()
        self.state = JobState(self.limits)
        self.alerts = AlertBook()
        self.sight = Sight(self.state.told)
        self.last_tick = 0.0
        self._pausing: dict[int, str] = {}

    def ingest_batch(self, batch: Incoming, now: float, times: npt.NDArray[np.float64] | None = None) -> int:
        self.follow()
        return len(self.state.ingest_batch(batch, now, times))

    def saw(self, blobs: list[bytes], now: float) -> None:
        take_looks(self.state, self.sight, blobs, now)

    def tick(self, now: float) -> list[Change]:
        """The other monitor's alert changes told since the last call, its ticks being ours."""
        changes = self.follow()
        self.sight.now = now
        self.last_tick = now
        return changes

    def asking(self) -> list[Command]:
        return []

    def idle(self, now: float) -> None:
        """Nothing to tell: no screen is attached to this one."""

    def away(self, since: float, why: str, seconds: int) -> None:
        """A screen's own pauses are no monitor's: the one it follows tells its own."""

    def close(self) -> None:
        """Nothing is recorded, nothing served."""

    def follow(self) -> list[Change]:
        """What the other monitor told since the last call, taken in; its alerts' changes."""
        changes: list[Change] = []
        for told in self.source.take_told():
            if isinstance(told, CatchUp):
                self.alerts.restore(told.history, told.active)
                self.state.admit_worlds_up_to(told.max_world)
            elif isinstance(told, AlertEvent):
                change = self.alerts.follow(told.event, told.alert, told.t)
                changes += [change] if change is not None else []
            else:
                self._pausing = told.pausing
                self.alerts.told_doing(told.doing)
        return changes

    @property
    def pausing(self) -> dict[int, str]:
        """The other monitor's ranks in a usual pause, as of its latest tick."""
        return self._pausing
