"""Messages as senders put them on the wire, for tests of what the monitor lets in."""

from __future__ import annotations

import dataclasses
import struct

import msgpack

from distmon.wire import Report, encode


def message(report: Report) -> bytes:
    """The frame a rank sends; for claims no frame header holds (a rank of 10**18), a bare
    report, as version 1 sent it and a hostile sender still may."""
    try:
        return encode(report)
    except struct.error:
        return msgpack.packb(dataclasses.asdict(report), use_bin_type=True)
