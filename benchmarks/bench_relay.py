"""How many reports a node's relay forwards, and how many the monitor's Receiver takes in from
relays; prints a markdown table.

    .venv/bin/python benchmarks/bench_relay.py

1. **One relay process** (a real ``distmon relay``, default options): fake ranks in two other
   processes (64 DEALER sockets in all, round robin) send pre-encoded reports as fast as ZeroMQ takes
   them; a ROUTER in this process takes the relay's batches. The figure is the frames that
   reach it per second, over ``SECONDS`` after a warm-up.
2. **The Receiver** (the monitor's socket, :class:`~distmon.monitor.intake.receiver.Receiver`) in
   this process: fake relays in two other processes (16 DEALER sockets in all) send pre-built batches
   of N frames as fast as ZeroMQ takes them, as a relay sends them (columns, no report whole:
   a healthy job's usual second) or as relays before columns did (``distmon-batch/1``); the
   figure is the batches and frames that ``receive()`` hands out per second, each batch
   decoded and checked.

Senders and receivers share the machine's cores, so on a small machine the figures are a
floor: the sender's Python loop competes with what it measures.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event

import numpy as np
import psutil
import zmq
from simulated import SimJob

from distmon.monitor.intake.receiver import Receiver
from distmon.wire import encode
from distmon.wire.arrays import parse
from distmon.wire.column_batch import ColumnBatch, column_frames, decode_columns
from distmon.wire.sockets import Batch, Relay, batch_frames

SECONDS = 5.0
WARM_UP = 1.0
RANKS = 64
RELAYS = 16
SENDERS = 2
BATCH_SIZES = (8, 128, 1024)


def reports(n: int) -> list[bytes]:
    job = SimJob(world=n, start=time.time())
    frames = []
    for rank in range(n):
        report = job.report(rank, time.time())
        assert report is not None
        frames.append(encode(report))
    return frames


def send_forever(endpoint: str, messages: list[list[bytes]], sockets: int, stop: Event) -> None:
    """Send ``messages`` round robin over ``sockets`` DEALERs until ``stop``; blocking sends,
    so that the sender keeps pace with what takes them."""
    context = zmq.Context()
    senders = []
    for _ in range(sockets):
        sock = context.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 10)
        sock.setsockopt(zmq.SNDTIMEO, 100)
        sock.connect(endpoint)
        senders.append(sock)
    i = 0
    while not stop.is_set():
        for _ in range(1000):
            with contextlib.suppress(zmq.Again):
                senders[i % sockets].send_multipart(messages[i % len(messages)])
            i += 1
    for sock in senders:
        sock.close(linger=0)
    context.term()


def senders(endpoint: str, messages: list[list[bytes]], sockets: int) -> tuple[list[BaseProcess], Event]:
    """``SENDERS`` processes sending ``messages``, ``sockets`` DEALERs in all; set the event to stop them."""
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    each = sockets // SENDERS
    processes = [
        spawn.Process(target=send_forever, args=(endpoint, messages, each, stop), daemon=True) for _ in range(SENDERS)
    ]
    for process in processes:
        process.start()
    return processes, stop


def stop_senders(processes: list[BaseProcess], stop: Event) -> None:
    stop.set()
    for process in processes:
        process.join(5)


class Window:
    """Counts what arrives over ``SECONDS``, from ``WARM_UP`` after the first arrival (the
    sender's start-up, a spawned interpreter, takes seconds on a busy machine), with the CPU
    time the counting side spent meanwhile."""

    def __init__(self, cpu: psutil.Process) -> None:
        self.cpu = cpu
        self.frames = self.batches = 0
        self.start: float | None = None
        self.started = self.cpu_start = 0.0
        self.elapsed = self.cpu_seconds = 0.0

    def add(self, batches: int, frames: int) -> None:
        """What one read took in; call before the next read."""
        now = time.monotonic()
        if self.start is None:
            if batches:
                self.start = now + WARM_UP
        elif not self.started:
            if now >= self.start:
                self.started, self.cpu_start = now, self._cpu()
        else:
            self.batches += batches
            self.frames += frames
            self.elapsed = now - self.started
            if self.elapsed >= SECONDS:
                self.cpu_seconds = self._cpu() - self.cpu_start

    @property
    def done(self) -> bool:
        return self.cpu_seconds > 0

    def _cpu(self) -> float:
        times = self.cpu.cpu_times()
        return float(times.user + times.system)

    def row(self, what: str) -> tuple[str, str, str, str]:
        return (
            what,
            f"{self.batches / self.elapsed:,.0f}",
            f"{self.frames / self.elapsed:,.0f}",
            f"{self.frames / self.cpu_seconds:,.0f} ({self.cpu_seconds / self.elapsed:.0%} of a core)",
        )


def relay_rate(directory: str) -> tuple[str, str, str, str]:
    """Frames and batches per second through one relay process."""
    listen, upstream = f"ipc://{directory}/relay.sock", f"ipc://{directory}/up.sock"
    context = zmq.Context()
    monitor = context.socket(zmq.ROUTER)
    monitor.setsockopt(zmq.MAXMSGSIZE, -1)
    monitor.bind(upstream)
    relay = subprocess.Popen(
        [sys.executable, "-m", "distmon", "relay", "--listen", listen, "--upstream", upstream],
        stderr=subprocess.DEVNULL,
    )
    while not os.path.exists(listen[len("ipc://") :]):
        time.sleep(0.02)
    frames = reports(RANKS)
    processes, stop = senders(listen, [[f] for f in frames], RANKS)
    window = Window(psutil.Process(relay.pid))
    while not window.done:
        if monitor.poll(100):
            batch = decode_columns(monitor.recv_multipart()[1:])
            window.add(1, len(batch))
    stop_senders(processes, stop)
    relay.send_signal(signal.SIGTERM)
    relay.wait(10)
    monitor.close(linger=0)
    context.term()
    return window.row(f"one relay process: {RANKS} fake ranks, {len(frames[0])} B reports")


def receiver_rate(directory: str, size: int, columns: bool) -> tuple[str, str, str, str]:
    """Batches and frames per second the Receiver takes in, batches of ``size`` frames, as
    columns or as frames."""
    endpoint = f"ipc://{directory}/monitor-{size}-{columns}.sock"
    receiver = Receiver(endpoint)
    frames = reports(size)
    batches = []
    for i in range(RELAYS):
        batch = Batch.of(frames, relay=Relay(f"node-{i}:1", f"node-{i}"))
        parsed = parse(batch)
        numbers = ColumnBatch.of(parsed, np.zeros(len(parsed), dtype=bool), batch.relays)
        batches.append(column_frames(numbers) if columns else batch_frames(batch))
    processes, stop = senders(endpoint, batches, RELAYS)
    window = Window(psutil.Process())
    while not window.done:
        taken = receiver.receive(0.1)
        window.add(len(taken), sum(len(b) for b in taken))
    stop_senders(processes, stop)
    receiver.close()
    kind = "columns" if columns else "frames (distmon-batch/1)"
    return window.row(f"Receiver: {RELAYS} fake relays, batches of {size}, {kind}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-relay-") as directory:
        rows = [relay_rate(directory)]
        rows += [receiver_rate(directory, size, columns) for columns in (True, False) for size in BATCH_SIZES]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} cores (load average {load}), {SECONDS:.0f} s each after {WARM_UP:.0f} s of warm-up\n")
    print("| measure | batches/s | frames/s | frames per CPU second of the relay / Receiver |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
