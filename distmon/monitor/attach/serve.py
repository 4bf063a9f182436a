"""The screens attached to a live monitor (``distmon watch --attach``), fed without ever
slowing it.

The monitor's thread only hands things over: each batch it admitted (a reference), each
tick's alert changes (packed, the alerts change after), and, at a tick when a screen waits
for it, the job as it stands (references to the reports, immutable bytes). A thread of its
own does the rest: it binds where screens attach (:func:`distmon.endpoint.viewer_address`,
with the job's key as the ranks' endpoint has it), takes their hellos, packs the records
(:mod:`distmon.monitor.attach.messages`) and sends them to each screen without ever blocking. A
screen that does not take what it is sent (slow, stopped, its network gone) is fed at most
:data:`BACKLOG_BYTES` beyond its catch-up and what ZeroMQ queues for it
(:data:`SEND_QUEUE` messages), then skipped, until it says hello again and catches up. With
no screen attached, the monitor hands over nothing.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

import zmq

from distmon import endpoint as endpoints
from distmon import keys
from distmon.monitor.attach.messages import HELLO, JobAsItStands, alert_message, numbered, pack, tick_message
from distmon.monitor.overview import OverviewTracker
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.batches import batch_records
from distmon.monitor.state.alerts import Change
from distmon.monitor.state.ending import first_cause
from distmon.wire.column_batch import Incoming

MAX_SCREENS = 32
"""Screens attached at once; another one's hello makes the one attached longest go."""
SEND_QUEUE = 4
"""Messages ZeroMQ holds for a screen (each up to ``PIECE_BYTES`` of reports)."""
BACKLOG_BYTES = 16 * 1024 * 1024
"""Bytes of the stream held for a screen beyond its catch-up, at most: seconds of reports at
thousands of ranks. A screen that falls this far behind is skipped."""
OUTBOX_BYTES = 64 * 1024 * 1024
"""Bytes of reports handed over by the monitor's thread and not yet taken by the server's,
at most: past that the oldest go, and every screen catches up again."""
CATCH_UP_EVERY = 2.0
"""Seconds of the monitor's clock between two catch-ups, at least: every screen waiting then
takes the same one, and screens asking again and again cost the monitor one a while."""
TURN = 0.02
"""Seconds the server's thread waits for a hello before sending on."""
HEARTBEAT_MS = 5000
HEARTBEAT_TIMEOUT_MS = 15000
"""A screen whose connection answers no heartbeat for this long (its host or network gone) is
disconnected and forgotten."""


@dataclass
class _Screen:
    """One screen attached, as the server's thread follows it."""

    waiting: bool = True
    """It asked for a catch-up and has not been sent it."""
    skipped: bool = False
    """It fell too far behind: nothing is sent it until it says hello again."""
    sent: int = 0
    """The number of the next message in its stream."""
    backlog: deque[bytes] = field(default_factory=deque)
    held: int = 0
    limit: int = BACKLOG_BYTES

    def start(self, messages: list[bytes]) -> None:
        """A catch-up, the stream numbered anew from it."""
        self.waiting = self.skipped = False
        self.sent = 0
        self.backlog = deque(messages)
        self.held = sum(map(len, messages))
        self.limit = self.held + BACKLOG_BYTES

    def queue(self, messages: list[bytes]) -> bool:
        """Hold ``messages`` for it; False once it is skipped for holding too much."""
        self.backlog.extend(messages)
        self.held += sum(map(len, messages))
        if self.held > self.limit:
            self.backlog.clear()
            self.held = 0
            self.skipped = True
        return not self.skipped


Handed = tuple[float, Incoming] | bytes | JobAsItStands


class AttachServer:
    """Where the screens of the monitor of ranks at ``endpoint`` attach. Raises
    :class:`~distmon.endpoint.EndpointError` where that address cannot be bound."""

    def __init__(self, endpoint: str, key: keys.JobKey | None = None) -> None:
        self.address = endpoints.viewer_address(endpoint)
        self.skips = 0
        """Times a screen was skipped for falling behind."""
        self._tracker = OverviewTracker()
        """The job's progress, tick by tick, so that a screen attached late says how long the
        job has stood still as a screen attached from the start would."""
        self._handed: deque[Handed] = deque()
        self._handed_bytes = 0
        self._lost = False
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._caught_up = -CATCH_UP_EVERY
        """When the job as it stands was last taken for screens (the monitor's clock)."""
        self._live = False
        self._screens: dict[bytes, _Screen] = {}
        self._context = zmq.Context(io_threads=1)
        self._authenticator = keys.admit_job_clients(self._context, key) if key is not None else None
        self._socket = self._context.socket(zmq.ROUTER)
        for option, value in (
            (zmq.LINGER, 0),
            (zmq.ROUTER_MANDATORY, 1),
            (zmq.SNDHWM, SEND_QUEUE),
            (zmq.RCVHWM, 64),
            (zmq.MAXMSGSIZE, 4096),  # a hello, and the key's handshake
            (zmq.HEARTBEAT_IVL, HEARTBEAT_MS),
            (zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS),
        ):
            self._socket.setsockopt(option, value)
        try:
            if key is not None:
                keys.as_server(self._socket, key)
            endpoints.bind(self._socket, self.address)
        except endpoints.EndpointError:
            self._close_sockets()
            raise
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="distmon-attach", daemon=True)
        self._thread.start()

    # --- the monitor's thread -----------------------------------------------------------

    @property
    def attached(self) -> bool:
        """A screen takes the stream, or waits to: only then is anything handed over."""
        return self._live or self._wanted.is_set()

    def batch(self, t: float, batch: Incoming) -> None:
        self._hand([(t, batch)])

    def tick(self, monitor: Monitor, now: float, changes: list[Change]) -> None:
        """Follow the job's progress; hand over the tick's alert changes, the job as it stands if a
        screen waits for it, and the tick."""
        self._tracker.observe(monitor, now)
        if not self.attached:
            return
        handed: list[Handed] = [alert_message(now, change) for change in changes]
        if self._wanted.is_set() and not now - CATCH_UP_EVERY < self._caught_up <= now:
            self._wanted.clear()
            self._caught_up = now
            handed.append(self._snapshot(monitor, now))
        handed.append(
            tick_message(now, monitor.state.dropped, monitor.state.unwatched, _doing(monitor), monitor.pausing)
        )
        self._hand(handed)

    def _hand(self, handed: list[Handed]) -> None:
        with self._lock:
            for item in handed:
                self._handed.append(item)
                self._handed_bytes += _bytes(item)
            while self._handed_bytes > OUTBOX_BYTES and len(self._handed) > 1:  # the server's thread is far behind
                self._handed_bytes -= _bytes(self._handed.popleft())
                self._lost = True

    def _snapshot(self, monitor: Monitor, now: float) -> JobAsItStands:
        state, book = monitor.state, monitor.alerts
        kept = {id(alert) for alert in book.history}
        alerts = list(book.history) + [a for a in book.active.values() if id(a) not in kept]
        index = {id(alert): i for i, alert in enumerate(alerts)}
        ranks = state.present()
        return JobAsItStands(
            t=now,
            max_world=state.max_world,
            history=[[a.key, a.to_json(), a.resolved] for a in alerts],
            active=[index[id(a)] for a in book.active.values()],
            progress=self._tracker.memory(),
            reports=state.raw_reports(),
            ranks=ranks,
            times=state.cols.received[ranks],
            via=state.cols.via[ranks],
            relays=list(state.relays),
        )

    def held(self) -> int:
        """Bytes of the stream held for the screens, not yet taken by them."""
        return sum(screen.held for screen in list(self._screens.values()))

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=2.0)

    # --- the server's thread ---------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                if self._socket.poll(int(TURN * 1000)):
                    self._take_hellos()
                self._pass_on()
                self._send()
                self._live = any(not s.waiting and not s.skipped for s in self._screens.values())
        finally:
            self._close_sockets()

    def _take_hellos(self) -> None:
        for _ in range(MAX_SCREENS):
            try:
                identity, *frames = self._socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if frames != [HELLO]:
                continue  # a screen asks for nothing else
            if identity not in self._screens and len(self._screens) >= MAX_SCREENS:
                del self._screens[next(iter(self._screens))]
            self._screens[identity] = _Screen()
            self._wanted.set()

    def _pass_on(self) -> None:
        """What the monitor's thread handed over, packed once, into each screen's backlog."""
        with self._lock:
            handed, lost = list(self._handed), self._lost
            self._handed.clear()
            self._handed_bytes, self._lost = 0, False
        live = [s for s in self._screens.values() if not s.waiting and not s.skipped]
        for screen in live if lost else []:
            screen.sent += 1  # a gap in its stream: it asks for a catch-up at once
        for item in handed:
            if isinstance(item, JobAsItStands):
                waiting = [s for s in self._screens.values() if s.waiting]
                messages = list(item.messages()) if waiting else []
                for screen in waiting:
                    screen.start(messages)
                live += waiting
                continue
            if not live:
                continue
            messages = [item] if isinstance(item, bytes) else [pack(r) for r in batch_records(*item)]
            for screen in live:
                if not screen.queue(messages):
                    self.skips += 1
            live = [s for s in live if not s.skipped]

    def _send(self) -> None:
        """Each screen's backlog, as far as its queue takes it now."""
        for identity, screen in list(self._screens.items()):
            while screen.backlog:
                message = screen.backlog[0]
                try:
                    self._socket.send_multipart([identity, numbered(screen.sent), message], zmq.NOBLOCK)
                except zmq.Again:
                    break  # its queue is full: what is left waits, up to its limit
                except zmq.ZMQError:
                    del self._screens[identity]  # gone
                    break
                screen.backlog.popleft()
                screen.held -= len(message)
                screen.sent += 1

    def _close_sockets(self) -> None:
        self._socket.close(linger=0)
        if self._authenticator is not None:
            self._authenticator.stop()
        self._context.term()


def _doing(monitor: Monitor) -> dict[str, dict[int, str]]:
    """What the ranks the monitor's first cause names do, in its rules' words: the words every
    screen shows (:class:`distmon.monitor.overview.Story`)."""
    found = first_cause(monitor.alerts.active.values())
    return {found.key: found.doing} if found is not None and found.doing else {}


def _bytes(item: Handed) -> int:
    if isinstance(item, bytes):
        return len(item)
    if isinstance(item, JobAsItStands):
        return 0
    return item[1].nbytes
