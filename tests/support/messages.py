"""Messages as senders put them on the wire, and a socket that sends them as a rank's would,
for tests of what the monitor lets in."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator
from contextlib import contextmanager

import msgpack
import zmq

from distmon import keys
from distmon.wire import Report, encode


def message(report: Report) -> bytes:
    """The frame a rank sends; for claims no frame header holds (a rank of 10**18), a bare
    report, as version 1 sent it and a hostile sender still may."""
    try:
        return encode(report)
    except struct.error:
        return msgpack.packb(dataclasses.asdict(report), use_bin_type=True)


@contextmanager
def sender(address: str, key: keys.JobKey | None = None, linger: int = 2000) -> Iterator[zmq.Socket]:
    """A DEALER socket connected to ``address`` (with ``key``, as a rank holding the job's key),
    whose sends never block: no high-water mark. On the way out it is closed, waiting up to
    ``linger`` ms for what it still holds to go."""
    context = zmq.Context()
    push = context.socket(zmq.DEALER)
    push.setsockopt(zmq.LINGER, linger)
    push.setsockopt(zmq.SNDHWM, 0)
    if key is not None:
        keys.as_client(push, key)
    push.connect(address)
    try:
        yield push
    finally:
        push.close()
        context.term()
