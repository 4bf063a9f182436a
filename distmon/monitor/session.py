"""The one driver of a monitoring session: feed → monitor → tick → finish.

``watch`` and ``replay`` (from the UI's timer), ``record`` (from its blocking loop),
``replay --headless`` and the tests' simulated jobs all run a :class:`Session` with the same
methods, so a replay runs the detector at the very moments, on the very messages, that the
live monitor did, and every way of watching a job ends with the same closing tick.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from distmon.channel import Batch
from distmon.monitor.alerts import Change
from distmon.monitor.feeds import Feed, Item, weight
from distmon.monitor.monitor import Monitor

Timed = list[tuple[float, Change]]
"""Alert changes, each with the time of the tick that made it."""


class Session:
    """Drives a monitor from a feed: each message ingested at its feed time (a batch's frames
    all at the batch's), the detector run once a second of feed time, on whole seconds after
    the first message. The clock is the feed's: a tick falls only once every message before
    it has been ingested, live or replayed.

    Call :meth:`run` (or :meth:`drain`) as often as the caller's loop turns, :meth:`finish`
    once when the feed ends or the caller stops, then :meth:`close`."""

    TICK = 1.0

    def __init__(self, feed: Feed, monitor: Monitor, on_tick: Callable[[float], None] | None = None) -> None:
        self.feed = feed
        self.monitor = monitor
        self.on_tick = on_tick
        self._next_tick: float | None = None
        self.finished = False
        """:meth:`finish` has run: the session's closing tick is behind it."""
        self.taken = 0
        """What the last :meth:`run` took, by :func:`~distmon.monitor.feeds.weight`: frames,
        as a rule."""

    def run(self, limit: int = 1000) -> list[Change]:
        """Take messages weighing up to ``limit``; returns the alert changes of the ticks run."""
        return [change for _, change in self.run_timed(limit)]

    def run_timed(self, limit: int = 1000) -> Timed:
        """As :meth:`run`, each change with the time of the tick that made it."""
        changes: Timed = []
        items = self.feed.take(limit)
        self.taken = sum(weight(message) for _, message in items)
        self.monitor.state.dropped.update(self.feed.take_dropped())
        pending: list[Item] = []
        for t, message in items:
            if self._next_tick is None:
                self._next_tick = t + self.TICK
            if t >= self._next_tick:
                self._ingest(pending)
                changes += self._tick_until(t)
            pending.append((t, message))
        self._ingest(pending)
        if self.taken < limit:  # the feed has handed over all it has up to its clock
            changes += self._tick_until(self.feed.now())
        return changes

    def _ingest(self, items: list[Item]) -> None:
        """Messages that came between two ticks, taken in as one batch, each at its time: the
        monitor reads a batch as arrays, one message at a time it would pay that a message."""
        if not items:
            return
        batches: list[Batch] = []
        straight: list[bytes] = []
        for _, message in items:
            if isinstance(message, Batch):
                batches.append(message)
            else:
                straight.append(message)
        if straight:
            batches.append(Batch.of(straight))
        times = np.concatenate(
            [np.full(len(m), t) for t, m in items if isinstance(m, Batch)]
            + [np.array([t for t, m in items if not isinstance(m, Batch)])]
        )
        batch = batches[0] if len(batches) == 1 else Batch.merged(batches)
        self.monitor.ingest_batch(batch, float(max(t for t, _ in items)), times)
        items.clear()

    def drain(self) -> Timed:
        """Everything the feed holds now, and the ticks up to its clock."""
        changes: Timed = []
        while True:
            changes += self.run_timed()
            if self.taken == 0:
                return changes

    def finish(self) -> Timed:
        """The tick that closes the session, at the next whole second, after what the feed
        still holds: live at exit and at the end of a replay alike, so that last words turn
        into alerts the same way in both. Runs once; later calls return nothing."""
        if self.finished:
            return []
        changes = self.drain()
        if self._next_tick is not None:
            changes += self._tick_until(self._next_tick)
        self.finished = True
        return changes

    def close(self) -> None:
        """Stop the feed and close the monitor (and its recording)."""
        self.feed.close()
        self.monitor.close()

    def _tick_until(self, t: float) -> Timed:
        if self._next_tick is None:
            return []
        changes: Timed = []
        while t >= self._next_tick:
            now = self._next_tick
            changes += [(now, change) for change in self.monitor.tick(now)]
            if self.on_tick is not None:
                self.on_tick(now)
            self._next_tick += self.TICK
        return changes
