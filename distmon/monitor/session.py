"""The one driver of a monitoring session: feed → monitor → tick → finish.

``watch`` and ``replay`` (from the UI's timer), ``record`` (from its blocking loop),
``replay --headless`` and the tests' simulated jobs all run a :class:`Session` with the same
methods, so a replay runs the detector at the very moments, on the very messages, that the
live monitor did, and every way of watching a job ends with the same closing tick.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from distmon.monitor.intake.feeds import Feed, Item, Stamped, weight
from distmon.monitor.pipeline import Monitoring
from distmon.monitor.rules.process import LAST_WORDS_GRACE
from distmon.monitor.state.alerts import Change
from distmon.monitor.state.unwatched import JUMPED, PAUSED
from distmon.wire.column_batch import ColumnBatch
from distmon.wire.sockets import Batch

ALONE = 1024
"""A relay's columns of this many frames or more are taken in on their own."""
Timed = list[tuple[float, Change]]
"""Alert changes, each with the time of the tick that made it."""


class Session:
    """Drives a monitor from a feed: each message ingested at its feed time (a batch's frames
    all at the batch's), the detector run once a second of feed time, on whole seconds after
    the first message. The clock is the feed's: a tick falls only once every message before
    it has been ingested, live or replayed.

    Call :meth:`run` (or :meth:`drain`) as often as the caller's loop turns, :meth:`finish`
    once when the feed ends or the caller stops, then :meth:`close`.

    Live, the session notices when it did not watch: its loop stood still (its process
    stopped, a swapping login node) or its clock jumped (a suspended VM resumed). The ticks of
    those seconds never run (the monitor saw nothing of them), and the monitor is told, so
    that it names no rank for a silence it did not see (:mod:`distmon.monitor.rules.keeping_up`)."""

    TICK = 1.0
    AWAY = 2.0
    """Seconds of the feed's clock between two turns of the caller's loop beyond which the
    monitor did not watch: well above a turn of the loop (:data:`distmon.commands.record.POLL`)
    and the longest tick (``benchmarks/bench_detector.py`` and ``bench_scale.py`` measure it)."""

    def __init__(self, feed: Feed, monitor: Monitoring, on_tick: Callable[[float], None] | None = None) -> None:
        self.feed = feed
        self.monitor = monitor
        self.on_tick = on_tick
        self._next_tick: float | None = None
        self.finished = False
        """:meth:`finish` has run: the session's closing tick is behind it."""
        self.taken = 0
        """What the last :meth:`run` took, by :func:`~distmon.monitor.intake.feeds.weight`: frames,
        as a rule."""
        self._turned: tuple[float, float] | None = None
        """The feed's clock and the monotonic clock at the last turn of the caller's loop."""
        self._paused = (0.0, 0.0)
        """Seconds the loop stood still that the feed's clock has yet to show, and until when
        (monotonic) it may still show them."""

    def run(self, limit: int = 1000) -> list[Change]:
        """Take messages weighing up to ``limit``; returns the alert changes of the ticks run."""
        return [change for _, change in self.run_timed(limit)]

    def run_timed(self, limit: int = 1000) -> Timed:
        """As :meth:`run`, each change with the time of the tick that made it."""
        changes: Timed = []
        items = self.feed.take(limit)
        clock = self.feed.now()  # after the take: no message taken is newer
        if self.feed.watching:
            self._notice_away(clock)
        self.taken = sum(weight(message) for _, message in items)
        dropped, unwatched = self.feed.take_losses()
        self.monitor.state.refused(dropped)
        self.monitor.state.not_watched(unwatched)
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
            changes += self._tick_until(clock)
        if self._next_tick is None:
            self.monitor.idle(clock)
        return changes

    def _notice_away(self, now: float) -> None:
        """Whether the loop stood still (the monotonic clock moved on by more than
        :attr:`AWAY` since the last turn: the process was stopped or starved), or the feed's
        clock jumped by more than that beyond the loop's own pause (a suspended VM resumed, the
        clock stepped, either way). The ticks of a jump's seconds are skipped. The feed's
        clock may catch up with a pause a turn later (its reader thread resumes after the
        loop): that much of its jump is the pause, not a jump of its own."""
        turned = time.monotonic()
        last, self._turned = self._turned, (now, turned)
        if last is None or self._next_tick is None:
            return
        stood, moved = turned - last[1], now - last[0]
        if stood >= self.AWAY:
            self.monitor.away(last[0], PAUSED, math.ceil(stood))
            self._paused = (self._paused[0] + stood, turned + self.AWAY)
        if abs(moved) < self.AWAY:
            return
        paused = self._paused[0] if turned <= self._paused[1] else 0.0
        jumped = moved - paused if moved > 0 else moved
        self._paused = (max(0.0, paused - moved), self._paused[1])
        if abs(jumped) >= self.AWAY:
            self.monitor.away(last[0], JUMPED, math.ceil(abs(jumped)))
        if now >= self._next_tick:  # the next tick after now: what came meanwhile is taken in first
            self._next_tick += (math.floor((now - self._next_tick) / self.TICK) + 1) * self.TICK
        elif moved < 0:
            self._next_tick = now + self.TICK

    def _ingest(self, items: list[Item]) -> None:
        """Messages that came between two ticks, taken in as one batch, each at its time: the
        monitor reads a batch as arrays, one message at a time it would pay that a message.
        A relay's columns of :data:`ALONE` frames or more are such a batch already, taken in
        as they came (merged, the reports a whole job's hang brings at once would be copied
        once more); smaller ones (a relay per node of eight ranks) are merged."""
        for columns, run in itertools.groupby(items, key=lambda item: isinstance(item[1], ColumnBatch)):
            if columns:
                self._ingest_columns([(t, batch) for t, batch in run if isinstance(batch, ColumnBatch)])
            else:
                self._ingest_frames(list(run))
        items.clear()

    def _ingest_columns(self, items: list[tuple[float, ColumnBatch]]) -> None:
        small: list[tuple[float, ColumnBatch]] = []
        for t, batch in items:
            if batch.looks:  # at the very time they came, whatever the batch is merged with
                self.monitor.saw(batch.looks, t)
            if not len(batch):  # a relay's sign of life, heard at its own time
                self.monitor.ingest_batch(batch, t)
                continue
            if len(batch) < ALONE:
                small.append((t, batch))
                continue
            self._ingest_merged(small)
            small = []
            self.monitor.ingest_batch(batch, t)
        self._ingest_merged(small)

    def _ingest_merged(self, items: list[tuple[float, ColumnBatch]]) -> None:
        if items:
            times = np.concatenate([np.full(len(batch), t) for t, batch in items])
            batch = items[0][1] if len(items) == 1 else ColumnBatch.merged([b for _, b in items])
            self.monitor.ingest_batch(batch, max(t for t, _ in items), times)

    def _ingest_frames(self, items: list[Item]) -> None:
        batches: list[Batch] = []
        times: list[npt.NDArray[np.float64]] = []
        straight: list[bytes] = []
        for t, message in items:
            if isinstance(message, Stamped):
                batches.append(message.batch)
                times.append(message.times)
            elif isinstance(message, Batch):
                batches.append(message)
                times.append(np.full(len(message), t))
            elif isinstance(message, bytes):
                straight.append(message)
        if straight:
            batches.append(Batch.of(straight))
            times.append(np.array([t for t, m in items if not isinstance(m, Batch | Stamped)]))
        batch = batches[0] if len(batches) == 1 else Batch.merged(batches)
        self.monitor.ingest_batch(batch, float(max(t for t, _ in items)), np.concatenate(times))

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
        into alerts the same way in both. A recording whose last record came of a tick (an
        alert's change, at its time) ends with the live monitor's closing tick: its replay has
        just run it. Runs once; later calls return nothing."""
        if self.finished:
            return []
        changes = self.drain()
        closed = (
            not self.feed.watching and self._next_tick is not None and self._next_tick - self.TICK >= self.feed.now()
        )
        if self._next_tick is not None and not closed:
            changes += self._tick_until(self._next_tick)
            if self._told_lately():
                changes += self._tick_until(self._next_tick)
        self.finished = True
        return changes

    def _told_lately(self) -> bool:
        """An eye told a process gone too lately for the closing tick to judge that it said no
        last words (:data:`~distmon.monitor.rules.process.LAST_WORDS_GRACE`): one more tick does,
        live and replayed alike (what the eyes told is recorded)."""
        closing = (self._next_tick or 0.0) - self.TICK
        return any(closing - told < LAST_WORDS_GRACE for told in self.monitor.state.gone.values())

    def close(self) -> None:
        """Close the monitor (its recording first), then stop the feed: whatever else fails
        or lingers on the way out, the recording is whole."""
        try:
            self.monitor.close()
        finally:
            self.feed.close()

    def _tick_until(self, t: float) -> Timed:
        if self._next_tick is None:
            return []
        changes: Timed = []
        while t >= self._next_tick:
            now = self._next_tick
            changes += [(now, change) for change in self.monitor.tick(now)]
            for command in self.monitor.asking():
                self.feed.send(command)
            if self.on_tick is not None:
                self.on_tick(now)
            self._next_tick += self.TICK
        return changes
