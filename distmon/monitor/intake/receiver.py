"""The monitor's end of the wire: one bound ZeroMQ ROUTER socket that every rank, or every
node's relay, connects to (see :mod:`distmon.wire.sockets`): reports, batches of them and Flight
Recorder dumps come in, commands go out to every peer heard from.

With a job key (:mod:`distmon.keys`) the socket is a CURVE server and a ZAP handler lets in
only clients presenting the job's client key. Connections refused in the handshake are
counted by reason, from the socket's own events (:class:`Handshakes`): ``no_key`` (a
sender without CURVE), ``wrong_key`` (another job's key), ``unexpected_key`` (a keyed
sender, a monitor without one), ``bad_handshake`` (any other failure). These count
connection attempts: a refused sender that retries is counted again.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque

import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import recv_monitor_message

from distmon import endpoint as endpoints
from distmon import keys
from distmon.endpoint import EndpointError as EndpointError
from distmon.monitor.state.admission import MAX_WORLD
from distmon.wire import MAX_MESSAGE_BYTES, WireError
from distmon.wire.column_batch import COLUMNS_TAG, Incoming, decode_columns
from distmon.wire.sockets import (
    BATCH_TAG,
    MAX_BATCH_BYTES,
    Batch,
    Command,
    Dump,
    decode_batch,
    decode_dump,
    encode_command,
    listening_socket,
)

NO_KEY = "no_key"
UNEXPECTED_KEY = "unexpected_key"
WRONG_KEY = "wrong_key"
BAD_HANDSHAKE = "bad_handshake"
EVENT_QUEUE = 1000
"""Handshake events waiting to be counted; beyond that libzmq drops them, uncounted."""
MAX_PEERS = 2 * MAX_WORLD
"""Connections remembered for commands; the least recently heard are forgotten first."""
RECEIVE_BYTES = 4 * MAX_BATCH_BYTES
"""Bytes one :meth:`Receiver.receive` takes at most (and one message more): what it returns
is held in memory at once."""
DUMP_QUEUE = 64
"""Flight Recorder dumps waiting to be written (each up to ``MAX_DUMP_MESSAGE_BYTES``); more are
dropped and counted as ``dump_overflow``."""


class Handshakes:
    """Counts connections refused in the handshake, from the socket's monitor events.

    A refusal is not always announced on the monitor's side: when a sender without a key
    notices the mismatch first, the monitor sees only a connection accepted and closed. So
    each accepted connection is followed until a handshake outcome arrives (outcomes taken
    oldest connection first: the total is exact, the reasons of concurrent failures may
    swap); a keyed monitor counts one closed without any as ``no_key``.
    """

    EVENTS = (
        zmq.EVENT_ACCEPTED
        | zmq.EVENT_DISCONNECTED
        | zmq.EVENT_HANDSHAKE_SUCCEEDED
        | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
        | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    )

    def __init__(self, keyed: bool) -> None:
        self.keyed = keyed
        self.refused: Counter[str] = Counter()
        self._pending: dict[int, None] = {}
        """Accepted connections (by fd) with no handshake outcome yet, oldest first."""

    def observe(self, event: int, value: int) -> None:
        if event == zmq.EVENT_ACCEPTED:
            self._pending[value] = None
        elif event == zmq.EVENT_DISCONNECTED:
            if value in self._pending:
                del self._pending[value]
                if self.keyed:
                    self.refused[NO_KEY] += 1
        else:
            if self._pending:
                del self._pending[next(iter(self._pending))]
            if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH or value == zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
                self.refused[WRONG_KEY] += 1
            elif value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
                self.refused[NO_KEY if self.keyed else UNEXPECTED_KEY] += 1
            elif event != zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.refused[BAD_HANDSHAKE] += 1


class Receiver:
    def __init__(self, endpoint: str, key: keys.JobKey | None = None) -> None:
        self.endpoint = endpoint
        self._handshakes = Handshakes(keyed=key is not None)
        self._context = zmq.Context(io_threads=1)
        self._authenticator: ThreadAuthenticator | None = None
        self._socket = listening_socket(self._context)
        self._events = self._socket.get_monitor_socket(Handshakes.EVENTS)
        self._events.setsockopt(zmq.RCVHWM, EVENT_QUEUE)
        self._peers: OrderedDict[bytes, None] = OrderedDict()
        self._dumps: deque[Dump] = deque()
        self._malformed: Counter[str] = Counter()
        self._poller = zmq.Poller()
        self._poller.register(self._socket, zmq.POLLIN)
        self._poller.register(self._events, zmq.POLLIN)
        self._clients = keys.JobClients()
        try:
            if key is not None:
                self._clients.admit(key)
                self._authenticator = keys.admit(self._context, self._clients)
                keys.as_server(self._socket, key)
            endpoints.bind(self._socket, endpoint)
        except EndpointError:
            self.close()
            raise

    def listen_for_eyes(self, key: keys.JobKey) -> int:
        """Listen also on a TCP port of every interface, for the nodes' eyes a command started
        (:mod:`distmon.reach`): only clients holding ``key`` are let in there, whatever the
        first endpoint admits (ZeroMQ takes a listener's security when it binds). Returns the
        port. Raises :class:`EndpointError`."""
        self._clients.admit(key)
        if self._authenticator is None:
            self._authenticator = keys.admit(self._context, self._clients)
        keys.as_server(self._socket, key)
        endpoints.bind(self._socket, "tcp://*:*")
        bound = self._socket.getsockopt(zmq.LAST_ENDPOINT)
        return int(bound.decode().rpartition(":")[2] if isinstance(bound, bytes) else str(bound).rpartition(":")[2])

    def receive(self, timeout: float, limit: int = 10_000) -> list[Incoming]:
        """What arrives within ``timeout`` seconds, up to ``limit`` messages and about
        ``RECEIVE_BYTES``: the relays' batches (columns, or frames from a relay that predates
        them), and one batch of the frames that came straight from ranks (none if no rank sent
        any). The dumps among them wait in :meth:`take_dumps`."""
        batches: list[Incoming] = []
        if not self._poller.poll(int(timeout * 1000)):
            return batches
        self._count_refusals()
        straight: list[bytes] = []
        taken = 0
        for _ in range(limit):
            if taken >= RECEIVE_BYTES:
                break
            try:
                peer, *frames = self._socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            taken += sum(len(frame) for frame in frames)
            self._heard(peer)
            if len(frames) == 1:
                if len(frames[0]) > MAX_MESSAGE_BYTES:
                    self._malformed["oversized"] += 1
                else:
                    straight.append(frames[0])
            elif frames[0] == COLUMNS_TAG:
                self._take_columns(frames, batches)
            elif frames[0] == BATCH_TAG:
                self._take_batch(frames, batches)
            else:
                self._take_dump(frames)
        if straight:
            batches.append(Batch.of(straight))
        return batches

    def _heard(self, peer: bytes) -> None:
        self._peers[peer] = None
        self._peers.move_to_end(peer)
        if len(self._peers) > MAX_PEERS:
            self._peers.popitem(last=False)

    def _take_batch(self, frames: list[bytes], batches: list[Incoming]) -> None:
        try:
            batches.append(decode_batch(frames))
        except WireError as e:
            self._malformed[e.reason] += 1

    def _take_columns(self, frames: list[bytes], batches: list[Incoming]) -> None:
        try:
            batches.append(decode_columns(frames))
        except WireError as e:
            self._malformed[e.reason] += 1

    def _take_dump(self, frames: list[bytes]) -> None:
        try:
            dump = decode_dump(frames)
        except WireError as e:
            self._malformed[e.reason] += 1
            return
        if len(self._dumps) >= DUMP_QUEUE:
            self._malformed["dump_overflow"] += 1
        else:
            self._dumps.append(dump)

    def take_dumps(self) -> list[Dump]:
        """The Flight Recorder dumps received since the last call."""
        dumps = list(self._dumps)
        self._dumps.clear()
        return dumps

    def send(self, command: Command) -> int:
        """Send ``command`` to every connection heard from (ranks, relays: they pass it down);
        returns how many it went to. Never blocks: a connection gone or full misses it."""
        data = encode_command(command)
        sent = 0
        for peer in list(self._peers):
            try:
                self._socket.send_multipart([peer, data], zmq.NOBLOCK)
                sent += 1
            except zmq.ZMQError:
                self._peers.pop(peer, None)
        return sent

    def take_refused(self) -> Counter[str]:
        """Connections refused in the handshake, and messages that were neither a report, a
        batch nor a dump, since the last call, by reason."""
        self._count_refusals()
        refused, self._handshakes.refused = self._handshakes.refused + self._malformed, Counter()
        self._malformed = Counter()
        return refused

    def _count_refusals(self) -> None:
        while self._events.poll(0):
            event = recv_monitor_message(self._events)
            self._handshakes.observe(event["event"], event["value"])

    def close(self) -> None:
        self._events.close(linger=0)
        self._socket.close(linger=0)
        if self._authenticator is not None:
            self._authenticator.stop()
        self._context.term()
