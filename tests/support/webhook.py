"""A webhook for tests: a real HTTP server on 127.0.0.1 that records the JSON POSTed to it."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver(ThreadingHTTPServer):
    """A webhook: records each POSTed body; fails the first ``fail_first`` with ``fail_status``;
    holds every request while ``hold`` is set."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.bodies: list[dict] = []
        self.requests = 0
        self.fail_first = 0
        self.fail_status = 500
        self.arrived = threading.Event()
        self.hold = threading.Event()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        s = self.server
        s.requests += 1
        s.arrived.set()
        if s.hold.is_set():
            s.release.wait(30)
        if s.requests <= s.fail_first:
            self.send_error(s.fail_status)
            return
        assert self.headers["Content-Type"] == "application/json"
        s.bodies.append(json.loads(body))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
