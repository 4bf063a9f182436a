"""A screen's feed from a live monitor (``distmon watch --attach``): what that monitor admitted,
each report at the time it received it, and what it told (:mod:`distmon.monitor.attach.messages`).

A daemon thread holds one socket connected where the monitor's screens attach
(:func:`distmon.endpoint.viewer_address`), so the screen never waits on the network. It says
hello, takes the catch-up (the job as it stands, every alert so far), then the stream. A
message missing from the stream (the monitor skipped this screen while it was slow or
stopped, or this screen fell behind), or a monitor silent for :data:`SILENT_AFTER`, and it
says hello again: the next catch-up puts it right. Nothing is ever sent that changes the
monitor.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from distmon import keys
from distmon.endpoint import viewer_address
from distmon.monitor.attach.messages import HELLO, AttachError, CatchUp, Progress, Standing, Tick, read
from distmon.monitor.intake.feeds import ATTACHED, Item, Source, Stamped, weight
from distmon.monitor.recording.format import AlertEvent, BatchRecord, ColumnRecord
from distmon.wire.column_batch import Incoming
from distmon.wire.sockets import Command

SILENT_AFTER = 5.0
"""Seconds without a message (the monitor ticks every second) after which the screen says
hello again: the monitor skipped it, restarted, or the network dropped it. Well above a
monitor's loop standing still for a long tick (``Session.AWAY``)."""
HELLO_EVERY = 2.0
"""Seconds between two hellos, at least."""
MAX_QUEUED = 512 * 1024 * 1024
"""Bytes of reports queued for the screen's loop at most; past that they are dropped and the
screen catches up again."""
MAX_MESSAGE = 64 * 1024 * 1024
"""The largest message a screen takes: a catch-up's alerts (up to ``MAX_HISTORY`` of them, with
their evidence); reports come in pieces of ``PIECE_BYTES``."""
UNREACHABLE_AFTER = 2.0
"""Seconds of refused connections after which nothing listens at the address."""
PROBE_TRIES = 8
"""Handshakes without a key tried, each cut off without a word (the network's doing, not the key's), before
a keyed screen gives up telling why the monitor refuses it."""
CONNECTION_EVENTS = (
    zmq.EVENT_CONNECTED
    | zmq.EVENT_CONNECT_RETRIED
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)
Told = CatchUp | AlertEvent | Tick


class AttachedFeed:
    """The stream of the monitor whose ranks connect to ``endpoint``, as a feed on the
    monitor's clock (:class:`distmon.monitor.intake.feeds.Feed`), and what it told, for a
    :class:`distmon.monitor.attach.follow.AttachedMonitor` (:meth:`take_told`)."""

    def __init__(self, endpoint: str, key: keys.JobKey | None = None, silent_after: float = SILENT_AFTER) -> None:
        """``silent_after``: :data:`SILENT_AFTER`, but for a monitor whose clock a test moves."""
        self.endpoint = endpoint
        self._silent_after = silent_after
        self.address = viewer_address(endpoint)
        self.keyed = key is not None
        self.catch_ups = 0
        """Catch-ups taken: the first, and one after each time the stream broke."""
        self.malformed = 0
        self.progress: Progress | None = None
        """The job's progress as the monitor followed it, as of the latest catch-up."""
        self._failed_at: float | None = None
        """When the monitor first refused this screen's handshake."""
        self._keyless: bool | None = None
        """Whether the monitor that refused this keyed screen holds no key, as a handshake without one tells
        (:meth:`_probe`); None until it does."""
        self._probe_tries = 0
        self._queue: deque[Item] = deque()
        self._queued = 0
        self._told: deque[Told] = deque()
        self._dropped: Counter[str] = Counter()
        self._unwatched: Counter[str] = Counter()
        self._totals: tuple[Counter[str], Counter[str]] = (Counter(), Counter())
        """What the monitor had refused, and the seconds it had not watched, as of its latest
        tick: the increments are handed over."""
        self._now = 0.0
        self._next: int | None = None
        """The number of the next message in the stream; None while waiting for a catch-up."""
        self._hello_at = -HELLO_EVERY
        self._heard_at: float | None = None
        self._connected = False
        self._refused_since: float | None = None
        self._lock = threading.Lock()
        self.caught_up = threading.Event()
        self._context = zmq.Context(io_threads=1)
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.IMMEDIATE, 1)
        self._socket.setsockopt(zmq.SNDHWM, 4)
        self._socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        if key is not None:
            keys.as_client(self._socket, key)
        self._events = self._socket.get_monitor_socket(CONNECTION_EVENTS)
        self._socket.connect(self.address)
        self._prober: zmq.Socket[Any] | None = None
        self._probe_events: zmq.Socket[Any] | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="distmon-attached", daemon=True)
        self._thread.start()

    # --- the reader thread ----------------------------------------------------------------

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        poller.register(self._events, zmq.POLLIN)
        try:
            while not self._stopping.is_set():
                self._hello_if_due()
                ready = dict(poller.poll(100))
                if self._events in ready:
                    self._watch_connection()
                    if self._failed_at is not None and self.keyed and self._prober is None:
                        poller.register(self._probe(), zmq.POLLIN)
                if self._probe_events is not None and self._probe_events in ready:
                    self._watch_probe(poller)
                if self._socket in ready:
                    for _ in range(1000):
                        try:
                            frames = self._socket.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        self._heard_at = time.monotonic()
                        self._take(frames)
        finally:
            self._close_probe()
            self._events.close(linger=0)
            self._socket.close(linger=0)
            self._context.term()

    def _hello_if_due(self) -> None:
        now = time.monotonic()
        silent = self._heard_at is None or now - self._heard_at > self._silent_after
        if (self._next is None or silent) and now - self._hello_at >= HELLO_EVERY:
            try:
                self._socket.send(HELLO, zmq.NOBLOCK)
            except zmq.ZMQError:
                return  # not connected yet: the next turn tries again
            self._hello_at = now

    def _watch_connection(self) -> None:
        while self._events.poll(0):
            kind = recv_monitor_message(self._events)["event"]
            if kind in (zmq.EVENT_CONNECTED, zmq.EVENT_HANDSHAKE_SUCCEEDED):
                self._connected, self._refused_since = True, None
            elif kind == zmq.EVENT_CONNECT_RETRIED:
                if self._refused_since is None:
                    self._refused_since = time.monotonic()
            elif self._failed_at is None:  # a handshake failed: ZeroMQ tries again
                self._failed_at = time.monotonic()

    def _probe(self) -> zmq.Socket[Any]:
        """A second connection, without a key, once the monitor refused this keyed screen: a monitor with no
        key accepts it, one holding a key refuses it. What the screen's own refusals say varies with the load
        (under two CPU burners, twelve in a row once named no mechanism, ci260); the probe's handshake does
        not. It sends nothing."""
        self._prober = self._context.socket(zmq.DEALER)
        self._prober.setsockopt(zmq.LINGER, 0)
        self._probe_events = self._prober.get_monitor_socket(CONNECTION_EVENTS)
        self._prober.connect(self.address)
        return self._probe_events

    def _watch_probe(self, poller: zmq.Poller) -> None:
        assert self._probe_events is not None
        assert self._prober is not None
        while self._keyless is None and self._probe_events.poll(0):
            kind = recv_monitor_message(self._probe_events)["event"]
            if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._keyless = True
            elif kind in (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_HANDSHAKE_FAILED_AUTH):
                self._keyless = False  # a handshake without a key refused: the monitor holds one
            elif kind == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL and self._probe_tries < PROBE_TRIES:
                self._probe_tries += 1
                self._prober.disconnect(self.address)
                self._prober.connect(self.address)
        if self._keyless is not None:
            poller.unregister(self._probe_events)
            self._close_probe()

    def _close_probe(self) -> None:
        for socket in (self._probe_events, self._prober):
            if socket is not None:
                socket.close(linger=0)
        self._probe_events = None

    def refused(self) -> str | None:
        """Why the monitor refuses this screen, in words a user acts on; None while it has not
        (or while its tries have yet to tell a monitor with no key from another job's key)."""
        if self._failed_at is None:
            return None
        if not self.keyed:  # only a monitor with a key refuses a screen without one
            return (
                f"the monitor at {self.endpoint} shows the job only to holders of its key: "
                f"give --key-file FILE (or ${keys.ENV}), the job's key file"
            )
        if self._keyless:
            return f"the monitor at {self.endpoint} has no job key: attach without one (no --key-file, no ${keys.ENV})"
        if self._keyless is None:
            return None
        return f"the monitor at {self.endpoint} refused this screen's key: it holds another job's"

    def _take(self, frames: list[bytes]) -> None:
        try:
            n, record = read(frames)
        except AttachError:
            self.malformed += 1
            return
        if isinstance(record, CatchUp):
            with self._lock:
                self._told.append(record)
                self._now = max(self._now, record.t)
            self._next = n + 1
            self.progress = record.progress
            self.catch_ups += 1
            self.caught_up.set()
            return
        if self._next is None:
            return  # what was on its way before the catch-up asked for
        if n != self._next:
            self._next = None  # a gap: catch up again
            return
        self._next += 1
        if record is not None:
            self._hand_over(record)

    def _hand_over(self, record: BatchRecord | ColumnRecord | AlertEvent | Standing | Tick) -> None:
        with self._lock:
            if isinstance(record, BatchRecord | ColumnRecord | Standing):
                self._enqueue(record)
            else:
                self._told.append(record)
            if isinstance(record, Tick):
                self._dropped.update(record.dropped - self._totals[0])
                self._unwatched.update(record.unwatched - self._totals[1])
                self._totals = (record.dropped, record.unwatched)
            if not isinstance(record, AlertEvent):
                self._now = max(self._now, record.t)

    def _enqueue(self, record: BatchRecord | ColumnRecord | Standing) -> None:
        message: Incoming | Stamped = (
            Stamped(record.batch, record.times) if isinstance(record, Standing) else record.batch
        )
        self._queue.append((record.t, message))
        self._queued += _size(message)
        if self._queued > MAX_QUEUED:  # the screen's loop is far behind: start again from the monitor's state
            self._queue.clear()
            self._queued = 0
            self._next = None

    # --- the screen's loop --------------------------------------------------------------

    def attach(self, timeout: float) -> str | None:
        """Wait until the monitor has sent the job as it stands: None, or why it has not in
        one line."""
        deadline = time.monotonic() + timeout
        while not self.caught_up.wait(0.02):
            refused = self.refused()
            if refused is not None:
                return refused
            since = self._refused_since
            if not self._connected and since is not None and time.monotonic() - since > UNREACHABLE_AFTER:
                return f"no monitor at {self.endpoint}: nothing listens at {self.address}, where its screens attach"
            if time.monotonic() > deadline or not self._thread.is_alive():
                return f"no monitor at {self.endpoint}: nothing answered at {self.address} in {timeout:g} s"
        return None

    def take(self, limit: int) -> list[Item]:
        """Reports due, weighing at most ``limit``: the last batch split if need be."""
        items: list[Item] = []
        taken = 0
        with self._lock:
            while self._queue and taken < limit:
                t, message = self._queue.popleft()
                self._queued -= _size(message)
                if weight(message) > limit - taken:
                    message, rest = _split(message, limit - taken)
                    self._queue.appendleft((t, rest))
                    self._queued += _size(rest)
                items.append((t, message))
                taken += weight(message)
        return items

    def take_told(self) -> list[Told]:
        """What the monitor told since the last call, in order."""
        with self._lock:
            told = list(self._told)
            self._told.clear()
            return told

    def take_losses(self) -> tuple[Counter[str], Counter[str]]:
        """What the monitor refused since the last call, by reason, and the seconds it did not
        watch, by why."""
        with self._lock:
            taken = self._dropped, self._unwatched
            self._dropped, self._unwatched = Counter(), Counter()
            return taken

    def now(self) -> float:
        """The monitor's clock, as of what it sent last."""
        with self._lock:
            return self._now

    watching = False
    finished = False
    player = None

    def source(self) -> Source:
        return Source(ATTACHED, self.endpoint, silent_for=self.silent_for())

    def send(self, command: Command) -> int:
        """A screen asks the ranks nothing: the monitor it is attached to does."""
        return 0

    def silent_for(self) -> float:
        """Seconds since the monitor last sent anything (0 before it has)."""
        heard = self._heard_at
        return 0.0 if heard is None else max(0.0, time.monotonic() - heard)

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=2.0)


def _size(message: Any) -> int:
    batch: Incoming = message.batch if isinstance(message, Stamped) else message
    return batch.nbytes


def _split(message: Incoming | Stamped | bytes, k: int) -> tuple[Incoming | Stamped, Incoming | Stamped]:
    """The first ``k`` frames of a batch, and the rest."""
    if isinstance(message, Stamped):
        n = len(message.batch)
        return Stamped(message.batch.slice(0, k), message.times[:k]), Stamped(
            message.batch.slice(k, n), message.times[k:]
        )
    assert not isinstance(message, bytes)
    return message.slice(0, k), message.slice(k, len(message))
