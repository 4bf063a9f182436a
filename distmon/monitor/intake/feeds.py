"""Where the monitor's messages come from: the feeds, live or replayed.

A feed is a live endpoint (:class:`LiveFeed`) or a stream of records (:class:`ReplayFeed`: a
recording, or a simulated job); each hands out ``(monitor time, message)`` pairs, a message
being a rank's raw report (a replay), a :class:`~distmon.wire.sockets.Batch` of them (what came
straight from the ranks together, or from a relay that predates columns) or a relay's
:class:`~distmon.wire.column_batch.ColumnBatch`, and tells the time on its own clock. The loop
that feeds them to a monitor is the one driver's, :class:`~distmon.monitor.session.Session`,
which takes any of them.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from distmon.keys import JobKey
from distmon.monitor.intake.receiver import DUMP_QUEUE, EndpointError, Receiver
from distmon.monitor.recording.format import (
    AlertEvent,
    BatchRecord,
    ColumnRecord,
    Dropped,
    LooksRecord,
    MessageRecord,
    Record,
)
from distmon.monitor.recording.reader import Records, check_recording, read_recording
from distmon.monitor.rules.keeping_up import OVERFLOW
from distmon.monitor.state.columns import F8
from distmon.node import looks as eye_looks
from distmon.node.eye import NodeEye
from distmon.wire.arrays import parse
from distmon.wire.column_batch import ColumnBatch, Incoming
from distmon.wire.sockets import LOOK, Batch, Command, Dump

MAX_GAP = 3600.0
"""Seconds of silence (no record at all) a replay plays at most: the detector has said all it
will about a silent job long before, and a longer gap (a monitor idle over a weekend, a
damaged clock) would take a tick a second to cross. Longer silences are played as this long."""
Clock = Callable[[], float]


@dataclass
class Stamped:
    """Frames that arrived at different times, each with its own (``times``): the reports a
    live monitor holds, handed to a screen attached to it (:mod:`.attached`)."""

    batch: Batch
    times: F8


Item = tuple[float, bytes | Incoming | Stamped]


def weight(message: bytes | Incoming | Stamped) -> int:
    """What a message counts for against a feed's limits: its frames (a batch with none, a
    relay's sign of life, counts as one)."""
    if isinstance(message, Stamped):
        return max(1, len(message.batch))
    return 1 if isinstance(message, bytes) else max(1, len(message))


LIVE = "live"
ATTACHED = "attached"
REPLAY = "replay"


@dataclass(frozen=True)
class Source:
    """Where a feed's messages come from, as a screen says it: ``kind`` (:data:`LIVE`, the
    ranks at an endpoint; :data:`ATTACHED`, a monitor running elsewhere; :data:`REPLAY`, a
    recording), ``where`` (the endpoint, or the recording's path), and how that is going."""

    kind: str
    where: str
    dropped: int = 0
    """Live: frames dropped because the reader fell behind."""
    silent_for: float = 0.0
    """Attached: seconds since the monitor attached to last said anything."""


class Player(Protocol):
    """A feed that plays something recorded: it can be paused, stepped, sped up and sent to
    the next alert (a replay)."""

    start: float
    speed: float

    @property
    def jumping(self) -> bool: ...
    @property
    def paused(self) -> bool: ...
    def toggle_pause(self) -> None: ...
    def step(self, seconds: float = 1.0) -> None: ...
    def set_speed(self, speed: float) -> None: ...
    def jump_to_next_alert(self) -> None: ...
    def alert_raised(self, t: float) -> None:
        """An alert was raised at ``t``: a jump to the next alert stops there."""
        ...


class Feed(Protocol):
    """Where a monitor's messages come from, and what a screen needs to know of it."""

    @property
    def watching(self) -> bool:
        """Whether the ranks are watched through this feed now (a live endpoint): the
        seconds the loop reading it stood still are seconds nobody watched, and what the
        monitor asks of the ranks goes down it."""
        ...

    @property
    def finished(self) -> bool:
        """Nothing more will come (a recording played to its end)."""
        ...

    @property
    def player(self) -> Player | None:
        """Where it can be paused and sought (a replay); None for the others."""
        ...

    def source(self) -> Source: ...

    def send(self, command: Command) -> int:
        """Ask the ranks (their relays, the nodes' eyes) something; how many peers it went
        to. A feed that reaches no rank sends nothing."""
        ...

    def take(self, limit: int) -> Sequence[Item]:
        """Messages due by now, oldest first, weighing at most ``limit`` (:func:`weight`);
        never blocks."""
        ...

    def now(self) -> float:
        """The feed's clock: what ``now`` means for the monitor."""
        ...

    def take_losses(self) -> tuple[Counter[str], Counter[str]]:
        """Since the last call: the messages refused before the monitor saw them, by reason,
        and the seconds it did not watch, by why (:mod:`distmon.monitor.state.unwatched`; a
        recording's, or those of the monitor a screen is attached to)."""
        ...

    def close(self) -> None: ...


class LiveFeed:
    """A bound endpoint read by a daemon thread, so the UI never waits on the network.

    Batches are stamped with the clock when they arrive and queued up to ``capacity`` frames
    and ``max_bytes`` of them: seven seconds of 131,072 ranks' columns, two of the second in
    which every rank's report comes whole (a whole job's hang), so that a loop held up a few
    seconds (its host busy) loses nothing. When the reader falls that far behind, the oldest
    frames are dropped and counted (each report is a rank's complete state, so a newer one makes an
    older one redundant), and handed over with the refusals as ``overflow``, so the monitor
    knows it is behind. Commands to the ranks and their Flight Recorder dumps pass through
    the same thread, which alone touches the socket.

    The monitor's host is a node like the others: its ``eye`` (:class:`~distmon.node.eye.NodeEye`)
    is asked what a ``look`` command asks of this host, watches the processes of the ranks of
    this host that report here for their end, as a relay's eye does its node's, and what it
    saw is handed over as a relay's eye's is, an empty batch of columns carrying its looks,
    stamped when taken.
    """

    def __init__(
        self,
        endpoint: str,
        clock: Clock = time.time,
        capacity: int = 1_000_000,
        key: JobKey | None = None,
        max_bytes: int = 256 * 1024 * 1024,
        eye: NodeEye | None = None,
        eyes: JobKey | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.eye = eye
        self._eye_spoke = False
        self.dropped = 0
        self.received = 0
        self._clock = clock
        self._receiver = Receiver(endpoint, key)
        self.eyes_port = None if eyes is None else self._listen_for_eyes(eyes)
        """Where the nodes' eyes a command starts report (any interface), with the key ``eyes``."""
        self._queue: deque[tuple[float, Incoming]] = deque()
        self._queued_frames = 0
        self._queued_bytes = 0
        self._capacity = capacity
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

    def _listen_for_eyes(self, key: JobKey) -> int:
        try:
            return self._receiver.listen_for_eyes(key)
        except EndpointError:
            self._receiver.close()
            raise

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                with self._lock:
                    commands = list(self._commands)
                    self._commands.clear()
                for command in commands:
                    self._receiver.send(command)
                    if command.action == LOOK and self.eye is not None:
                        self.eye.want(eye_looks.wanted_looks(command.looks or []))
                batches = self._receiver.receive(0.1)
                t = self._clock()  # what came by now is in hand: the watermark, whatever the eye takes next
                if self.eye is not None:
                    for batch in batches:
                        if isinstance(batch, Batch) and len(batch):
                            self.eye.reporting(parse(batch).headers)  # the ranks on this host, straight here
                    if (seen := self._seen(self.eye)) is not None:
                        batches.append(seen)
                    if found := self.eye.reports():
                        batches.append(Batch.of(found))
                refused = self._receiver.take_refused()
                dumps = self._receiver.take_dumps()
                with self._lock:
                    self._dumps.extend(dumps)
                    self._refused.update(refused)
                    for batch in batches:
                        self.received += len(batch)
                        self._enqueue(t, batch)
                    self._watermark = t
        finally:
            self._receiver.close()

    def _seen(self, eye: NodeEye) -> ColumnBatch | None:
        """What this host's eye saw since the last turn, if anything; at the first turn, even
        nothing: that this host has an eye."""
        looks = eye.take()
        if not looks and self._eye_spoke:
            return None
        self._eye_spoke = True
        return ColumnBatch(looks=[eye_looks.encode_looks([looks])])

    def _enqueue(self, t: float, batch: Incoming) -> None:
        self._queue.append((t, batch))
        self._queued_frames += weight(batch)
        self._queued_bytes += batch.nbytes
        while self._queue and (self._queued_frames > self._capacity or self._queued_bytes > self._max_bytes):
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        """Drop the oldest frames, as many as the caps need, from the oldest batch (the whole
        batch if it holds none)."""
        t, oldest = self._queue.popleft()
        self._queued_frames -= weight(oldest)
        self._queued_bytes -= oldest.nbytes
        n = len(oldest)
        if n == 0:
            return
        over_count = n - (self._capacity - self._queued_frames)
        over_bytes = bisect.bisect_left(oldest.frame_ends(), oldest.nbytes - (self._max_bytes - self._queued_bytes))
        k = min(n, max(1, over_count, over_bytes))
        self.dropped += k
        self._refused[OVERFLOW] += k  # the monitor's own loss: it must not blame the ranks for it
        if k < n:
            rest = _telling(oldest.slice(k, n), oldest)
            self._queue.appendleft((t, rest))
            self._queued_frames += weight(rest)
            self._queued_bytes += rest.nbytes

    def take(self, limit: int) -> list[tuple[float, Incoming]]:
        """Batches due, weighing at most ``limit``: the last one split if need be."""
        items: list[tuple[float, Incoming]] = []
        taken = 0
        with self._lock:
            while self._queue and taken < limit:
                t, batch = self._queue.popleft()
                self._queued_frames -= weight(batch)
                self._queued_bytes -= batch.nbytes
                if weight(batch) > limit - taken:
                    batch, rest = batch.slice(0, limit - taken), batch.slice(limit - taken, len(batch))
                    self._queue.appendleft((t, rest))
                    self._queued_frames += weight(rest)
                    self._queued_bytes += rest.nbytes
                items.append((t, batch))
                taken += weight(batch)
            return items

    def take_losses(self) -> tuple[Counter[str], Counter[str]]:
        with self._lock:
            refused, self._refused = self._refused, Counter()
            return refused, Counter()

    watching = True
    finished = False
    player = None

    def source(self) -> Source:
        return Source(LIVE, self.endpoint, dropped=self.dropped)

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
        """Wait until what has arrived by now is in the queue (a reader's cycle, 0.1 s), with
        what this host's eye sees of the ranks' processes now: one killed a moment ago is told
        gone beside the last words of those it took down."""
        deadline = time.monotonic() + timeout
        if self.eye is not None:
            self.eye.prober.check_ends(timeout)
        target = self._clock()
        while self.now() < target and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=2.0)
        if self.eye is not None:
            self.eye.close()


def _telling(rest: Incoming, batch: Incoming) -> Incoming:
    """``rest`` of ``batch``, its first frames dropped, still telling what ``batch`` told of
    frames dropped or refused on the way."""
    rest.dropped = dict(batch.dropped)
    if isinstance(rest, ColumnBatch) and isinstance(batch, ColumnBatch):
        rest.refused = Counter(batch.refused)
    return rest


class ReplayFeed:
    """Records released by a virtual clock that can run at any speed, pause, step and jump
    to the next recorded alert. ``speed`` is a factor of real time; ``math.inf`` plays as
    fast as the reader takes messages.

    ``source`` is a recording's path, or the records themselves (a simulated job's), which
    end at ``end`` (the last record's time by default). For a path, raises
    ``RecordingError`` for a file that is not a recording or of which nothing can be read
    (the whole file is checked first); damaged records are skipped, a file cut off
    mid-write plays up to its last whole record, and :meth:`trouble` says so."""

    def __init__(
        self,
        source: str | Iterable[Record],
        speed: float = 1.0,
        clock: Clock = time.monotonic,
        end: float | None = None,
    ) -> None:
        self.path = source if isinstance(source, str) else ""
        created = 0.0
        self._records: Iterator[Record]
        self.read: Records | None = None
        """The recording's records, which say what was wrong with the file once read."""
        if isinstance(source, str):
            check_recording(source)
            header, self.read = read_recording(source)
            self._records = self.read
            created = float(header.get("created", 0))
        else:
            self._records = iter(source)
        self._dropped: Counter[str] = Counter()
        self._unwatched: Counter[str] = Counter()
        self._clock = clock
        self._end = end
        self._last: float | None = None
        """The time of the last record read, as recorded."""
        self._shift = 0.0
        """Seconds of silence beyond :data:`MAX_GAP` left out so far."""
        self._gaps: list[float] = []
        self._next: Record | None = self._pull()
        self.start = self._next.t if self._next is not None else created
        self._position = self.start
        self._anchor = clock()
        self._target: float | None = None
        self.speed = speed
        self.paused = False
        self.jumping = False

    watching = False

    @property
    def finished(self) -> bool:
        return self._next is None

    @property
    def player(self) -> ReplayFeed:
        return self

    def source(self) -> Source:
        return Source(REPLAY, self.path)

    def send(self, command: Command) -> int:
        """A recording reaches no rank."""
        return 0

    def now(self) -> float:
        if self.paused or self.finished or self.jumping or math.isinf(self.speed):
            return self._position
        return self._position + (self._clock() - self._anchor) * self.speed

    def take(self, limit: int) -> list[Item]:
        """Records due, their messages weighing at most ``limit`` (:func:`weight`: a batch
        record its frames), the last one whole."""
        if self.paused and self._target is None:
            return []
        fast = self.jumping or math.isinf(self.speed)
        until = self._target if self._target is not None else (math.inf if fast else self.now())
        out: list[Item] = []
        taken = 0
        while self._next is not None and self._next.t <= until and taken < limit:
            record = self._next
            if isinstance(record, Dropped) and out:
                break  # its seconds count from its time: what came before is ticked through first
            self._next = self._pull()
            if isinstance(record, MessageRecord):
                out.append((record.t, record.payload))
                taken += 1
            elif isinstance(record, BatchRecord | ColumnRecord):
                out.append((record.t, record.batch))
                taken += weight(record.batch)
            elif isinstance(record, LooksRecord):
                out.append((record.t, ColumnBatch(looks=[record.looks])))  # as the monitor's own eye hands them over
                taken += 1
            elif isinstance(record, Dropped):
                self._dropped.update(record.dropped)
                self._unwatched.update(record.unwatched)
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

    def take_losses(self) -> tuple[Counter[str], Counter[str]]:
        taken = self._dropped, self._unwatched
        self._dropped, self._unwatched = Counter(), Counter()
        return taken

    def _pull(self) -> Record | None:
        """The next record, a silence before it over :data:`MAX_GAP` played as ``MAX_GAP``."""
        record = next(self._records, None)
        if record is None:
            return None
        if self._last is not None and record.t - self._last > MAX_GAP:
            self._gaps.append(record.t - self._last)
            self._shift += record.t - self._last - MAX_GAP
        self._last = record.t
        return dataclasses.replace(record, t=record.t - self._shift) if self._shift else record

    def trouble(self) -> list[str]:
        """What was wrong with the recording, one line each: damage, and silences cut short."""
        lines = [trouble] if self.read is not None and (trouble := self.read.trouble()) else []
        if self._gaps:
            lines.append(
                f"{self.path or 'the records'}: {len(self._gaps)} silence(s) with no record, the longest "
                f"{max(self._gaps):.0f} s, played as {MAX_GAP:.0f} s each: the times after them are shifted"
            )
        return lines

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
