"""A real monitor's end of the wire for tests: a bound ZeroMQ PULL socket that decodes reports.

It deliberately uses ZeroMQ and :func:`distmon.wire.decode` directly rather than the
monitor package, so tests of the rank side depend only on the wire.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import zmq

from distmon.wire import Report, WireError, decode
from distmon.wire.sockets import MONITOR_SOCKET


class Listener:
    """Collects every report sent to ``endpoint`` on a background thread, from bind to close."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.reports: list[Report] = []
        self.bytes = 0
        self.rejected: list[WireError] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._context = zmq.Context(io_threads=1)
        self._socket = self._context.socket(MONITOR_SOCKET)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(endpoint)
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-listener", daemon=True)
        self._thread.start()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self._closing.is_set():
            if not self._socket.poll(50):
                continue
            _peer, data, *_ = self._socket.recv_multipart()
            with self._arrived:
                self.bytes += len(data)
                try:
                    self.reports.append(decode(data))
                except WireError as e:
                    self.rejected.append(e)
                self._arrived.notify_all()

    def snapshot(self) -> list[Report]:
        with self._lock:
            return list(self.reports)

    def by_rank(self) -> dict[int, list[Report]]:
        """Every report so far, per rank, in arrival order."""
        ranks: dict[int, list[Report]] = {}
        for report in self.snapshot():
            ranks.setdefault(report.rank, []).append(report)
        return ranks

    def wait_for(self, condition: Callable[[list[Report]], object], timeout: float) -> bool:
        """Wait until ``condition(reports)`` is true; False if ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while not condition(self.reports):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._arrived.wait(left)
            return True

    def close(self) -> None:
        self._closing.set()
        self._thread.join()
        self._socket.close(linger=0)
        self._context.term()
