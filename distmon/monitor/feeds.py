"""Where the monitor's messages come from, and the one loop that feeds them to it.

A feed is a live endpoint (:class:`LiveFeed`) or a stream of records (:class:`ReplayFeed`: a
recording, or a simulated job); each hands out ``(monitor time, raw message)`` pairs, the
message one rank's or a :class:`~distmon.channel.Batch` of them, and tells the time on its
own clock. :class:`Pump` drives a :class:`~distmon.monitor.monitor.Monitor` from any of
them: ``watch``, ``record``, ``replay`` and the tests' simulated jobs all run through it,
so a replay runs the detector at the very moments, on the very messages, that the live
monitor did.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from distmon.channel import Batch, Command, Dump
from distmon.keys import JobKey
from distmon.monitor.alerts import Change
from distmon.monitor.monitor import Monitor
from distmon.monitor.receiver import DUMP_QUEUE, Receiver
from distmon.monitor.recording import (
    AlertEvent,
    BatchRecord,
    Dropped,
    Message,
    Record,
    check_recording,
    read_recording,
)

Clock = Callable[[], float]
Item = tuple[float, bytes | Batch]
"""A message or a batch of them, with the monitor time it arrived."""
Frame = tuple[float, bytes]


class Feed(Protocol):
    def take(self, limit: int) -> list[Item]:
        """Messages due by now, oldest first, at most ``limit``; never blocks."""
        ...

    def now(self) -> float:
        """The feed's clock: what ``now`` means for the monitor."""
        ...

    def take_dropped(self) -> Counter[str]:
        """What was refused before the monitor saw it, by reason, since the last call."""
        ...

    def close(self) -> None: ...


class LiveFeed:
    """A bound endpoint read by a daemon thread, so the UI never waits on the network.

    Messages are stamped with the clock when they arrive and queued up to ``capacity``
    messages and ``max_bytes``; when the reader falls that far behind, the oldest are
    dropped and counted (each report is a rank's complete state, so a newer one makes an
    older one redundant). Commands to the ranks and their Flight Recorder dumps pass through
    the same thread, which alone touches the socket.
    """

    def __init__(
        self,
        endpoint: str,
        clock: Clock = time.time,
        capacity: int = 200_000,
        key: JobKey | None = None,
        max_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        self.endpoint = endpoint
        self.dropped = 0
        self.received = 0
        self._clock = clock
        self._receiver = Receiver(endpoint, key)
        self._queue: deque[Frame] = deque(maxlen=capacity)
        self._queued_bytes = 0
        self._max_bytes = max_bytes
        self._refused: Counter[str] = Counter()
        self._commands: deque[Command] = deque(maxlen=16)
        self._dumps: deque[Dump] = deque(maxlen=DUMP_QUEUE)
        self._lock = threading.Lock()
        self._watermark = clock()
        """Every message received by then is in the queue: the monitor's clock never runs
        ahead of what it has been handed, so its ticks see what a replay's would."""
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="distmon-feed", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                with self._lock:
                    commands = list(self._commands)
                    self._commands.clear()
                for command in commands:
                    self._receiver.send(command)
                messages = self._receiver.receive(0.1)
                refused = self._receiver.take_refused()
                dumps = self._receiver.take_dumps()
                t = self._clock()
                with self._lock:
                    self._dumps.extend(dumps)
                    self._refused.update(refused)
                    self.received += len(messages)
                    for message in messages:
                        self._enqueue((t, message))
                    self._watermark = t
        finally:
            self._receiver.close()

    def _enqueue(self, item: Frame) -> None:
        while self._queue and (
            len(self._queue) == self._queue.maxlen or self._queued_bytes + len(item[1]) > self._max_bytes
        ):
            self._queued_bytes -= len(self._queue.popleft()[1])
            self.dropped += 1
        self._queue.append(item)
        self._queued_bytes += len(item[1])

    def take(self, limit: int) -> list[Item]:
        with self._lock:
            n = min(limit, len(self._queue))
            items = [self._queue.popleft() for _ in range(n)]
            self._queued_bytes -= sum(len(raw) for _, raw in items)
            return list(items)

    def take_dropped(self) -> Counter[str]:
        with self._lock:
            refused, self._refused = self._refused, Counter()
            return refused

    def send(self, command: Command) -> int:
        """Queue ``command`` for every rank heard from; sent within a tenth of a second."""
        with self._lock:
            self._commands.append(command)
        return 1

    def take_dumps(self) -> list[Dump]:
        with self._lock:
            dumps = list(self._dumps)
            self._dumps.clear()
            return dumps

    def now(self) -> float:
        with self._lock:
            return self._watermark

    def settle(self, timeout: float = 1.0) -> None:
        """Wait until what has arrived by now is in the queue (a reader's cycle, 0.1 s)."""
        target, deadline = self._clock(), time.monotonic() + timeout
        while self.now() < target and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=2.0)


class ReplayFeed:
    """Records released by a virtual clock that can run at any speed, pause, step and jump
    to the next recorded alert. ``speed`` is a factor of real time; ``math.inf`` plays as
    fast as the reader takes messages.

    ``source`` is a recording's path, or the records themselves (a simulated job's), which
    end at ``end`` (the last record's time by default). For a path, raises
    ``RecordingError`` for a file that is not a recording or is damaged (the whole file is
    checked first); a file cut off mid-write plays up to its last whole record."""

    def __init__(
        self,
        source: str | Iterable[Record],
        speed: float = 1.0,
        clock: Clock = time.monotonic,
        end: float | None = None,
    ) -> None:
        self.path = source if isinstance(source, str) else ""
        created = 0.0
        if isinstance(source, str):
            check_recording(source)
            header, self._records = read_recording(source)
            created = float(header.get("created", 0))
        else:
            self._records = iter(source)
        self._dropped: Counter[str] = Counter()
        self._clock = clock
        self._end = end
        self._next: Record | None = next(self._records, None)
        self.start = self._next.t if self._next is not None else created
        self._position = self.start
        self._anchor = clock()
        self._target: float | None = None
        self.speed = speed
        self.paused = False
        self.jumping = False

    @property
    def finished(self) -> bool:
        return self._next is None

    def now(self) -> float:
        if self.paused or self.finished or self.jumping or math.isinf(self.speed):
            return self._position
        return self._position + (self._clock() - self._anchor) * self.speed

    def take(self, limit: int) -> list[Item]:
        if self.paused and self._target is None:
            return []
        fast = self.jumping or math.isinf(self.speed)
        until = self._target if self._target is not None else (math.inf if fast else self.now())
        out: list[Item] = []
        while self._next is not None and self._next.t <= until and len(out) < limit:
            record = self._next
            self._next = next(self._records, None)
            if isinstance(record, Message):
                out.append((record.t, record.payload))
            elif isinstance(record, BatchRecord):
                out.append((record.t, record.batch))
            elif isinstance(record, Dropped):
                self._dropped.update(record.counts)
            elif self.jumping and isinstance(record, AlertEvent) and record.event == "raised":
                self._set_position(record.t)
                self.jumping = False
                self.paused = True
                return out
            if fast or self._next is None:
                self._position = record.t
        if self._next is None and self._end is not None:
            self._position = max(self._position, self._end)
        if self._target is not None and (self._next is None or self._next.t > self._target):
            self._set_position(self._position if self.finished else self._target)
            self._target = None
        return out

    def take_dropped(self) -> Counter[str]:
        dropped, self._dropped = self._dropped, Counter()
        return dropped

    def _set_position(self, t: float) -> None:
        self._position = t
        self._anchor = self._clock()

    def pause(self) -> None:
        self._set_position(self.now())
        self.paused = True

    def resume(self) -> None:
        self._set_position(self.now())
        self.paused = self.jumping = False
        self._target = None

    def toggle_pause(self) -> None:
        if self.paused:
            self.resume()
        else:
            self.pause()

    def set_speed(self, speed: float) -> None:
        self._set_position(self.now())
        self.speed = speed

    def step(self, seconds: float = 1.0) -> None:
        """Pause, then release the next ``seconds`` of the recording."""
        self.pause()
        if not self.finished:
            self._target = self._position + seconds

    def jump_to_next_alert(self) -> None:
        """Play as fast as possible up to the next alert raised in the recording, then pause
        there (:meth:`alert_raised` stops it earlier at an alert raised in this replay)."""
        self._set_position(self.now())
        self._target = None
        self.paused = False
        self.jumping = True

    def alert_raised(self, t: float) -> None:
        if self.jumping:
            self.jumping = False
            self.paused = True
            self._set_position(t)

    def close(self) -> None:
        close = getattr(self._records, "close", None)
        if close is not None:
            close()


class Pump:
    """Drives a monitor from a feed: each message ingested at its feed time, the detector
    run once a second of feed time, on whole seconds after the first message. The clock is
    the feed's: a tick falls only once every message before it has been ingested, live or
    replayed, so a replay runs the detector at the very moments, on the very messages, that
    the live monitor did."""

    TICK = 1.0

    def __init__(self, feed: Feed, monitor: Monitor, on_tick: Callable[[float], None] | None = None) -> None:
        self.feed = feed
        self.monitor = monitor
        self.on_tick = on_tick
        self._next_tick: float | None = None
        self.taken = 0
        """Messages taken by the last :meth:`run`."""

    def run(self, limit: int = 1000) -> list[Change]:
        """Take up to ``limit`` messages; returns the alert changes of the ticks run."""
        return [change for _, change in self.run_timed(limit)]

    def run_timed(self, limit: int = 1000) -> list[tuple[float, Change]]:
        """As :meth:`run`, each change with the time of the tick that made it."""
        changes: list[tuple[float, Change]] = []
        items = self.feed.take(limit)
        self.taken = len(items)
        self.monitor.state.dropped.update(self.feed.take_dropped())
        for t, item in items:
            if self._next_tick is None:
                self._next_tick = t + self.TICK
            changes += self._tick_until(t)
            for raw in item.frames() if isinstance(item, Batch) else [item]:
                self.monitor.ingest(raw, t)
        if len(items) < limit:  # the feed has handed over all it has up to its clock
            changes += self._tick_until(self.feed.now())
        return changes

    def drain(self) -> Iterator[tuple[float, Change]]:
        """Everything the feed holds now, and the ticks up to its clock."""
        while True:
            yield from self.run_timed()
            if self.taken == 0:
                return

    def finish(self) -> list[tuple[float, Change]]:
        """The tick that closes a run, at the next whole second: live at exit and at the end
        of a replay alike, so that last words turn into alerts the same way in both."""
        changes = list(self.drain())
        if self._next_tick is not None:
            changes += self._tick_until(self._next_tick)
        return changes

    def _tick_until(self, t: float) -> list[tuple[float, Change]]:
        if self._next_tick is None:
            return []
        changes: list[tuple[float, Change]] = []
        while t >= self._next_tick:
            now = self._next_tick
            changes += [(now, change) for change in self.monitor.tick(now)]
            if self.on_tick is not None:
                self.on_tick(now)
            self._next_tick += self.TICK
        return changes
