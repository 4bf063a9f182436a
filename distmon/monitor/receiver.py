"""The monitor's end of the wire: one bound ZeroMQ PULL socket that every rank connects to."""

from __future__ import annotations

import zmq

from distmon.endpoint import bind_address
from distmon.wire import MAX_MESSAGE_BYTES


class EndpointError(Exception):
    """The endpoint cannot be bound (in use, bad address); the message says why."""


class Receiver:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._context = zmq.Context(io_threads=1)
        self._socket = self._context.socket(zmq.PULL)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.RCVHWM, 100_000)
        self._socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES * 4)
        try:
            self._socket.bind(bind_address(endpoint))
        except zmq.ZMQError as e:
            self.close()
            raise EndpointError(f"cannot listen on {endpoint}: {zmq.strerror(e.errno)}") from None

    def receive(self, timeout: float, limit: int = 10_000) -> list[bytes]:
        """Every message that arrives within ``timeout`` seconds, up to ``limit``."""
        messages: list[bytes] = []
        if not self._socket.poll(int(timeout * 1000)):
            return messages
        while len(messages) < limit:
            try:
                messages.append(self._socket.recv(zmq.NOBLOCK))
            except zmq.Again:
                break
        return messages

    def close(self) -> None:
        self._socket.close(linger=0)
        self._context.term()
