"""A node's relay: the node's ranks report to it, and it forwards their reports upstream, to
the monitor or to the relay above it, as one :class:`~distmon.wire.column_batch.ColumnBatch` an
interval.

Why: a job of 131,072 ranks would otherwise hold that many connections open at the monitor
and send it that many messages a second, each read on its own. Through a relay per node the
monitor holds one connection per node and takes one message per node a second, already in
columns; through a tree of relays (a relay's upstream may be another relay) fewer still.

What flows where (see :mod:`distmon.wire.sockets`, :mod:`distmon.wire.column_batch`):

- up, batched: each rank frame (a single-frame message) is read, with the interval's others,
  as arrays (:mod:`distmon.wire.arrays`): its header and rows go up as columns, its
  report only when it has news or the monitor asked for it (:mod:`distmon.node.news`),
  each frame named as come through this relay. A frame that cannot be read is counted, and
  told upstream with the batch. Batches from relays below are merged in with the relays
  they name, so that the monitor learns every relay of the tree (the frames of a relay that
  predates columns read as this relay's own). A batch goes every interval, or as soon as it
  holds ``batch`` frames or ``MAX_BATCH_BYTES``;
- up, every interval, even empty: the batch names this relay, the monitor's sign that the
  relay (and the relays below it) are alive;
- up, at once: Flight Recorder dumps, unchanged;
- up, with each batch: what the node's eye saw (:mod:`distmon.node`): the relay is the
  monitor's eye on its node, looking at the processes the monitor asks about as it looks at its
  own host's, and taking their stacks from outside; while it looks closely (a rank the others
  wait for) a batch goes every :data:`~distmon.node.prober.CLOSE_PERIOD`, so that what it saw
  reaches the monitor as soon as the monitor's own eye's would;
- down: the monitor's commands, unchanged, to every peer heard from (ranks, relays below);
  a request for whole reports (``details``) or looks (``look``) is the relays' alone: kept,
  and passed only to the relays below.

The relay is the ranks' endpoint, so it keeps their rule: it never blocks. Upstream it is
connected as a rank's agent is (``IMMEDIATE``, a short ``SNDHWM``): a batch that cannot go
at once, the upstream absent or slow, is dropped and counted, never queued without bound.
A relay that dies costs the ranks only the reports it held: their sockets reconnect by
themselves once a relay listens on the endpoint again.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter, OrderedDict
from collections.abc import Callable

import numpy as np
import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import recv_monitor_message

from distmon import endpoint as endpoints
from distmon import keys
from distmon.node import looks as eye_looks
from distmon.node.eye import NodeEye
from distmon.node.news import REFRESH, News
from distmon.node.prober import CLOSE_PERIOD
from distmon.wire import MAX_MESSAGE_BYTES, WireError
from distmon.wire.arrays import parse
from distmon.wire.column_batch import COLUMNS_TAG, ColumnBatch, column_frames, decode_columns
from distmon.wire.sockets import (
    BATCH_TAG,
    DETAILS,
    DUMP_TAG,
    LOOK,
    MAX_BATCH_BYTES,
    RANK_SOCKET,
    Batch,
    Relay,
    decode_batch,
    decode_command,
    decode_dump,
    listening_socket,
)

BATCH_FRAMES = 10_000
"""Frames a batch holds before it goes without waiting for the interval (``--batch``)."""
MAX_BATCH_FRAMES = 100_000
"""The most ``--batch`` may be: a batch's header takes 8 bytes a frame, within the slack of
``MAX_BATCH_FRAME``."""
SEND_HWM = 4
"""Batches ZeroMQ holds for a slow upstream before the relay drops the next one."""
LINGER_MS = 500
"""How long closing waits for the last batch to leave."""
MAX_PEERS = 262_144
"""Connections remembered for commands; the least recently heard are forgotten first."""
TAKE_LIMIT = 10_000
"""Messages taken from below in one turn, so that commands from above still go down promptly."""
POLL_MS = 100
"""The longest wait for traffic: how soon a request to stop is seen."""
END_SETTLE = 0.1
"""Seconds after a batch that told a process ended before the next goes: last words the
process sent before it ended have reached the relay by then."""
HEARTBEAT_MS = 2000
"""With a lifeline, how often the relay pings its upstream (ZeroMQ's heartbeat), and a third of
how long an unanswered ping lets the connection stand: a head whose host went away unannounced
is noticed as one that closed its end."""
UPSTREAM_EVENTS = zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED


class NodeRelay:
    """One relay: a ROUTER bound on ``listen`` for the ranks (and relays below), a DEALER
    connected to ``upstream``. Raises :class:`~distmon.endpoint.EndpointError` when ``listen``
    cannot be bound or ``upstream`` is no address."""

    def __init__(
        self,
        listen: str,
        upstream: str,
        key: keys.JobKey | None = None,
        interval: float = 1.0,
        batch: int = BATCH_FRAMES,
        refresh: float = REFRESH,
        eye: NodeEye | None = None,
        lifeline: float | None = None,
    ) -> None:
        host = socket.gethostname()
        self.me = Relay(f"{host}:{os.getpid()}", host)
        self.listen = listen
        self.upstream = upstream
        self.interval = interval
        self.batch = batch
        self.counts: Counter[str] = Counter()
        """What the relay did, and what it dropped, by name (its closing line)."""
        self._frames: list[bytes] = []
        self._below: list[Batch] = []
        """Frames from relays below that predate columns: read as this relay's own."""
        self._columns: list[ColumnBatch] = []
        self._lost = 0
        """Frames dropped on the way (here, or below and told here) not yet told upstream."""
        self._refused: Counter[str] = Counter()
        """Frames this relay could not read, not yet told upstream."""
        self._held_frames = 0
        self._held_bytes = 0
        self._news = News(refresh)
        self.eye = eye or NodeEye(host)
        """The monitor's eye on this node (which finds the node's ranks, where told to)."""
        self._seen: list[eye_looks.Looks] = []
        """What the eye saw that has yet to go up."""
        self._flushed = 0.0
        """When the last batch went (monotonic)."""
        self._read_links = False
        """The eye has read the node's links once: a later reading it hands over tells a change."""
        self._told_an_end = False
        """The last batch told that a process ended: the next goes :data:`END_SETTLE` later, so
        that the monitor soon knows that no last words were on their way."""
        self.lifeline = lifeline
        """With a lifeline (a node's eye started by a command on another host), :meth:`run`
        returns once the upstream has been gone this many seconds: never reached, or lost and
        not back. A relay without one waits for its monitor however long it is away."""
        self._up_since: float | None = None
        """Since when the upstream has been gone (monotonic); None while it is there."""
        self._said = -REFRESH
        """When the eye last said anything upstream (monotonic): a monitor started late learns
        of it within :data:`~distmon.node.news.REFRESH`."""
        self._peers: OrderedDict[bytes, None] = OrderedDict()
        self._relays_below: OrderedDict[bytes, None] = OrderedDict()
        """The peers that sent batches: relays, which a request for whole reports goes down to."""
        self._context = zmq.Context(io_threads=1)
        self._authenticator: ThreadAuthenticator | None = None
        self._ranks = listening_socket(self._context)
        self._up = self._context.socket(RANK_SOCKET)
        self._up.setsockopt(zmq.LINGER, LINGER_MS)
        self._up.setsockopt(zmq.IMMEDIATE, 1)
        self._up.setsockopt(zmq.SNDHWM, SEND_HWM)
        self._up.setsockopt(zmq.MAXMSGSIZE, 2 * MAX_MESSAGE_BYTES)  # commands are small
        self._up_events = self._follow_upstream() if lifeline is not None else None
        try:
            if key is not None:
                self._authenticator = keys.admit_job_clients(self._context, key)
                keys.as_server(self._ranks, key)
                keys.as_client(self._up, key)
            endpoints.bind(self._ranks, listen)
            self._connect(upstream)
        except endpoints.EndpointError:
            self.close()
            raise
        self._poller = zmq.Poller()
        self._poller.register(self._ranks, zmq.POLLIN)
        self._poller.register(self._up, zmq.POLLIN)
        if self._up_events is not None:
            self._poller.register(self._up_events, zmq.POLLIN)
        self._keyed = key is not None

    def _connect(self, upstream: str) -> None:
        try:
            self._up.connect(upstream)
        except zmq.ZMQError as e:
            raise endpoints.EndpointError(f"cannot connect to {upstream}: {zmq.strerror(e.errno or 0)}") from None

    def run(self, stopping: Callable[[], bool]) -> None:
        """Relay until ``stopping()``; then send what is held, and return."""
        due = time.monotonic() + self.interval
        while not stopping():
            wait = min(POLL_MS, max(0, int((due - time.monotonic()) * 1000)))
            ready = dict(self._poller.poll(wait))
            if self._ranks in ready:
                self.take_from_below()
            if self._up in ready:
                self.pass_commands_down()
            now = time.monotonic()
            if self._up_events is not None and self._upstream_gone(now):
                break
            if now >= due or self._looking_closely(now):
                for frame in self.eye.reports():  # the ranks found on this node, reported for
                    self._hold_frame(frame)
                self.flush()
                due = max(due + self.interval, now) if now >= due else due
        self.take_from_below()
        self.flush()

    def _follow_upstream(self) -> zmq.Socket[bytes]:
        """The upstream socket's events, to tell when it is there; pings keep telling it."""
        self._up.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_MS)
        self._up.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * HEARTBEAT_MS)
        self._up_since = time.monotonic()
        return self._up.get_monitor_socket(UPSTREAM_EVENTS)

    def _upstream_gone(self, now: float) -> bool:
        """Whether the upstream has been gone :attr:`lifeline` seconds, from the upstream
        socket's events: there once its handshake succeeded (its connection, without a key),
        gone once disconnected."""
        assert self._up_events is not None and self.lifeline is not None
        there = zmq.EVENT_HANDSHAKE_SUCCEEDED if self._keyed else zmq.EVENT_CONNECTED
        while self._up_events.poll(0):
            event = recv_monitor_message(self._up_events)["event"]
            if event == there:
                self._up_since = None
            elif event == zmq.EVENT_DISCONNECTED and self._up_since is None:
                self._up_since = now
        return self._up_since is not None and now - self._up_since >= self.lifeline

    def _looking_closely(self, now: float) -> bool:
        """Whether what the eye saw should go up before the interval ends: it saw a process
        end (at once, and once more :data:`END_SETTLE` later: the monitor then knows that no last
        words were on their way) or a link change (at once), or the last batch went over
        :data:`CLOSE_PERIOD` ago (asked first: the loop turns for every message) and it has looks."""
        if self._told_an_end:
            return now - self._flushed >= END_SETTLE
        seen = self.eye.take()
        if seen:
            self._seen.append(seen)
        changed = self._read_links and seen.links is not None
        self._read_links = self._read_links or seen.links is not None
        if changed or any(s.state == "X" for one in self._seen for s in one.samples):
            return True  # an end, or a link that changed: at once (the monitor times the link by when it comes)
        looks = any(one.samples or one.stacks for one in self._seen)
        return looks and now - self._flushed >= CLOSE_PERIOD

    def take_from_below(self) -> None:
        """Take what the ranks and the relays below have sent, up to ``TAKE_LIMIT`` messages."""
        for _ in range(TAKE_LIMIT):
            try:
                peer, *frames = self._ranks.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._heard(peer)
            if len(frames) == 1:
                self._hold_frame(frames[0])
            elif frames[0] == COLUMNS_TAG:
                self._heard(peer, self._relays_below)
                self._hold_columns(frames)
            elif frames[0] == BATCH_TAG:
                self._heard(peer, self._relays_below)
                self._hold_batch(frames)
            elif frames[0] == DUMP_TAG:
                self._send_dump(frames)
            else:
                self.counts["malformed"] += 1

    def _hold_frame(self, frame: bytes) -> None:
        if len(frame) > MAX_MESSAGE_BYTES:
            self.counts["oversized"] += 1
            self._refused["oversized"] += 1
            return
        self._make_room(1, len(frame))
        self._frames.append(frame)
        self._held(1, len(frame))

    def _hold_batch(self, frames: list[bytes]) -> None:
        try:
            batch = decode_batch(frames)
        except WireError as e:
            self.counts[e.reason] += 1
            return
        self._make_room(len(batch), len(batch.payload))
        self._below.append(batch)
        self._held(len(batch), len(batch.payload))

    def _hold_columns(self, frames: list[bytes]) -> None:
        try:
            batch = decode_columns(frames)
        except WireError as e:
            self.counts[e.reason] += 1
            return
        self._make_room(len(batch), batch.nbytes)
        self._columns.append(batch)
        self._held(len(batch), batch.nbytes)

    def _make_room(self, frames: int, size: int) -> None:
        """Send what is held first if ``frames`` more of ``size`` bytes would overfill the batch."""
        if self._held_frames and (self._held_frames + frames > self.batch or self._held_bytes + size > MAX_BATCH_BYTES):
            self.flush()

    def _held(self, frames: int, size: int) -> None:
        """Count what was just added; a full batch goes at once."""
        self._held_frames += frames
        self._held_bytes += size
        if self._held_frames >= self.batch or self._held_bytes >= MAX_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Send what is held upstream as one batch of columns naming this relay (empty: a sign
        of life), with the frames dropped on the way since the last batch that went (the
        monitor blames no rank for their silence) and those that could not be read. What a
        batch that could not go held (frames, and the drops it told of) counts as this relay's
        own drop, and its ranks' reports go whole with their next frames."""
        own = self._own_columns()
        seen, now = [*self._seen, self.eye.take()], time.monotonic()
        said = [one for one in seen if one]
        if said or now - self._said >= REFRESH:  # an eye with nothing to say says it is there now and then
            own.looks = [eye_looks.encode_looks(said or seen[-1:])]
            self._said = now
        self._told_an_end = any(sample.state == "X" for one in said for sample in one.samples)
        self._read_links = self._read_links or any(one.links is not None for one in said)
        self._seen = []
        self._flushed = now
        batch = ColumnBatch.merged([own, *self._columns])
        if self._lost:
            batch.dropped[0] = batch.dropped.get(0, 0) + self._lost  # this relay is the merged batch's first
        batch.refused.update(self._refused)
        self._frames, self._below, self._columns, self._refused = [], [], [], Counter()
        self._held_frames = self._held_bytes = 0
        try:
            self._up.send_multipart(column_frames(batch), zmq.NOBLOCK)
        except zmq.Again:
            self.counts["batches_dropped"] += 1
            self.counts["frames_dropped"] += len(batch)
            self._lost = len(batch) + sum(batch.dropped.values())
            sent = np.diff(own.ends.astype(np.int64)) > 0
            self._news.unsent(own.headers["rank"][sent].astype(np.int64))
            return
        self._lost = 0
        self.counts["batches"] += 1
        self.counts["frames"] += len(batch)
        self.counts["whole"] += int(np.count_nonzero(np.diff(batch.ends.astype(np.int64))))

    def _own_columns(self) -> ColumnBatch:
        """The frames held from ranks (and from relays below that predate columns) as columns,
        their reports chosen; those that cannot be read counted."""
        frames = Batch.merged([Batch.of(self._frames, relay=self.me), *self._below])
        parsed = parse(frames)
        self.counts.update(parsed.refused)
        self.eye.reporting(parsed.headers)
        send = self._news.choose(parsed, time.monotonic())
        return ColumnBatch.of(parsed, send, frames.relays)

    def _send_dump(self, frames: list[bytes]) -> None:
        try:
            decode_dump(frames)
        except WireError as e:
            self.counts[e.reason] += 1
            return
        try:
            self._up.send_multipart(frames, zmq.NOBLOCK)
            self.counts["dumps"] += 1
        except zmq.Again:
            self.counts["dumps_dropped"] += 1

    def pass_commands_down(self) -> None:
        """Pass each command from upstream to every peer heard from; never blocks."""
        while True:
            try:
                frames = self._up.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                if len(frames) != 1:
                    raise WireError("malformed_command", f"{len(frames)} frames")
                command = decode_command(frames[0])
            except WireError as e:
                self.counts[e.reason] += 1
                continue
            if command.action == DETAILS:
                self._news.watch(command.ranks or [], time.monotonic())
                self.counts["asked"] += 1
                peers = self._relays_below
            elif command.action == LOOK:
                self.eye.want(eye_looks.wanted_looks(command.looks or []))
                self.counts["looks_asked"] += 1
                peers = self._relays_below
            else:
                self.counts["commands"] += 1
                peers = self._peers
            for peer in list(peers):
                try:
                    self._ranks.send_multipart([peer, frames[0]], zmq.NOBLOCK)
                except zmq.ZMQError:
                    peers.pop(peer, None)

    def _heard(self, peer: bytes, peers: OrderedDict[bytes, None] | None = None) -> None:
        heard = self._peers if peers is None else peers
        heard[peer] = None
        heard.move_to_end(peer)
        if len(heard) > MAX_PEERS:
            heard.popitem(last=False)

    def close(self) -> None:
        self.eye.close()
        self._ranks.close(linger=0)
        if self._up_events is not None:
            self._up.disable_monitor()
            self._up_events.close(linger=0)
        self._up.close()
        if self._authenticator is not None:
            self._authenticator.stop()
        self._context.term()
