"""The monitor of a screen attached to a live one (``distmon watch --attach``): it follows
the other's verdicts and judges nothing itself."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from distmon.monitor.attach.messages import CatchUp, Tick
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import AlertEvent
from distmon.monitor.state.alerts import Change
from distmon.wire.columns import Incoming


class Telling(Protocol):
    """What a monitor tells the screens attached to it, besides its reports, in order
    (:class:`distmon.monitor.attach.feed.AttachedFeed`)."""

    def take_told(self) -> list[CatchUp | AlertEvent | Tick]: ...


class AttachedMonitor(Monitor):
    """A monitor that judges nothing itself: the screen attached to another (``distmon watch
    --attach``). It takes in the reports that monitor admitted, as it received them (through
    the one driver, :class:`distmon.monitor.session.Session`), and keeps the alerts that monitor
    raised, with what their ranks do, as ``source`` hands them over: it has neither the prober
    nor py-spy of the job's hosts, and runs no detector."""

    def __init__(self, source: Telling) -> None:
        super().__init__()
        self.source = source
        self._pausing: dict[int, str] = {}

    def ingest_batch(self, batch: Incoming, now: float, times: npt.NDArray[np.float64] | None = None) -> int:
        self.follow()
        return super().ingest_batch(batch, now, times)

    def tick(self, now: float) -> list[Change]:
        """The other monitor's alert changes told since the last call, its ticks being ours."""
        changes = self.follow()
        self.last_tick = now
        return changes

    def follow(self) -> list[Change]:
        """What the other monitor told since the last call, taken in; its alerts' changes."""
        changes: list[Change] = []
        for told in self.source.take_told():
            if isinstance(told, CatchUp):
                self.alerts.restore(told.history, told.active)
                self.state.intake.max_world = told.max_world
            elif isinstance(told, AlertEvent):
                change = self.alerts.follow(told.event, told.alert, told.t)
                changes += [change] if change is not None else []
            else:
                self._pausing = told.pausing
                for key, doing in told.doing.items():
                    if key in self.alerts.active:
                        self.alerts.active[key].doing = doing
        return changes

    @property
    def pausing(self) -> dict[int, str]:
        """The other monitor's ranks in a usual pause, as of its latest tick."""
        return self._pausing
