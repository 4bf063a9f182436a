"""Messages as senders put them on the wire (a minimal and a full report, bad messages), and a
socket that sends them as a rank's would, for tests of what the monitor lets in."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgpack
import zmq

from distmon import keys
from distmon.wire import (
    MAX_MESSAGE_BYTES,
    ExceptionInfo,
    ExitInfo,
    GpuStatus,
    GroupStatus,
    Loader,
    Memory,
    Report,
    StackFrame,
    StepStats,
    Worker,
    encode,
    report_bytes,
)
from tests.support.simulate import SimJob

T0 = 1_700_000_000.0
"""When the reports :func:`report` builds were sent, unless a test says otherwise."""


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


def report(rank: int, world: int = 4, **fields: Any) -> Report:
    """Rank ``rank``'s report in a job of ``world``: process 1000 + rank on node-a, sent at
    :data:`T0`, with ``fields`` set on top (any of the report's, its identity too)."""
    identity: dict[str, Any] = {"job": "job", "host": "node-a", "pid": 1000 + rank, "t": T0, "n": 0, "interval": 1.0}
    return Report(rank=rank, world=world, **(identity | fields))


def minimal_report() -> Report:
    return Report(job="j", rank=3, world=8, host="node-1", pid=4242, t=1.7e9, n=5, interval=1.0)


def full_report() -> Report:
    """Every field set, every nested type present."""
    frame = StackFrame(file="train.py", line=42, func="step", code="loss.backward()")
    return Report(
        job="job-7",
        rank=3,
        world=8,
        host="node-1",
        pid=4242,
        t=1_700_000_000.5,
        n=17,
        interval=1.0,
        local_rank=3,
        torch="2.13.0",
        backend="nccl",
        steps=120,
        forwards=121,
        last_step_t=1_700_000_000.25,
        step_time=StepStats(n=100, mean=0.21, p50=0.2, max=0.9, last=0.19),
        data_wait=0.05,
        groups=[
            GroupStatus(
                id="0",
                backend="nccl",
                size=8,
                ranks=[[0, 8, 1]],
                timeout=600.0,
                enqueued=241,
                completed=240,
                started=241,
                desc="default_pg",
                op="all_reduce",
                since=1_700_000_000.1,
            )
        ],
        stalled_since=1_699_999_990.0,
        stack=[frame],
        memory=Memory(rss=2**31, host_total=2**36, host_available=2**35, shm_total=2**30, shm_free=2**29),
        gpu=GpuStatus(
            index=3,
            allocated=2**33,
            reserved=2**34,
            peak=2**34,
            used=2**34,
            total=2**36,
            util=97.0,
            temp=71.0,
            power=310.5,
            throttle=["sw_power_cap"],
            xid=79,
            ecc=0,
        ),
        loaders=[
            Loader(
                id=1,
                expected=2,
                workers=[
                    Worker(pid=5000, alive=True, rss=2**27),
                    Worker(pid=5001, alive=False, signal="SIGKILL"),
                ],
            )
        ],
        exception=ExceptionInfo(
            type="RuntimeError", message="CUDA out of memory", where=frame, traceback=[frame], t=1.7e9
        ),
        exit=ExitInfo(how="exception", t=1.7e9),
    )


def report_map(report: Report) -> dict:
    """The report inside the frame, as a map: what a bare (version 1) message was."""
    return msgpack.unpackb(report_bytes(encode(report)))


def bad_messages() -> list[bytes]:
    good = next(SimJob(world=1).stream(until=1))[1]
    report = msgpack.unpackb(report_bytes(good))
    return [
        b"\x00garbage\xff",
        good[: len(good) // 2],
        b"x" * (MAX_MESSAGE_BYTES + 1),
        msgpack.packb({**report, "v": 99}),
        msgpack.packb({**report, "rank": "zero"}),
        msgpack.packb([1, 2, 3]),
        b"",
    ]
