"""What a flood costs `distmon record` on TCP; prints a markdown table.

    .venv/bin/python benchmarks/bench_flood.py

The attack of issue 12, sent from one ZeroMQ PUSH socket while four real-looking ranks of a
world-4 job report: 100,000 fake ranks, 1,000 reports churning the real ranks' pids, 500
changing the world size, 5,000 of another job, 20,000 random byte strings and 200 oversized
messages. The flood is sent three times over; the recorder's resident memory is sampled
every 20 ms from outside, and read after each round (bounded memory stops growing). Then the
same with a job key, where the attacker (holding no key) is refused in the handshake and its
sends find no connection to queue to.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import zmq

from distmon import keys
from distmon.wire import MAX_MESSAGE_BYTES, Report, encode

MB = 1024 * 1024


def report(rank: int, world: int = 4, pid: int | None = None, job: str = "job", interval: float = 1.0) -> bytes:
    return encode(Report(job, rank, world, "node-a", pid or 1000 + rank, time.time(), 0, interval))


ROUNDS = 3


def flood_messages() -> list[bytes]:
    rng = random.Random(12)
    messages = [report(rank, pid=7) for rank in range(100_000)]
    messages += [report(i % 4, pid=50_000 + i) for i in range(1000)]
    messages += [report(i % 4, world=8 + i) for i in range(500)]
    messages += [report(0, job="another") for _ in range(5000)]
    messages += [rng.randbytes(rng.randrange(1, 200)) for _ in range(20_000)]
    messages += [b"\x00" * (MAX_MESSAGE_BYTES + 1)] * 200
    return messages


def flood(push: zmq.Socket, messages: list[bytes]) -> int:
    """Messages ZeroMQ took to send."""
    taken = 0
    for raw in messages:
        try:
            push.send(raw, zmq.NOBLOCK)
            taken += 1
        except zmq.Again:
            pass
    return taken


def run(directory: Path, keyed: bool) -> list[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    args = [sys.executable, "-m", "distmon", "record", "--out", str(directory / "flood.distmon"), "--endpoint", address]
    key = None
    if keyed:
        keys.generate(str(directory / "job.key"))
        key = keys.load_key(str(directory / "job.key"))
        args += ["--key-file", str(directory / "job.key")]
    log = directory / "record.log"
    with log.open("w") as err:
        recorder = subprocess.Popen(args, stderr=err)
    while "listening on" not in log.read_text():
        time.sleep(0.05)
    context = zmq.Context()
    real, attacker = context.socket(zmq.DEALER), context.socket(zmq.DEALER)
    if key is not None:
        keys.as_client(real, key)
    for sock in (real, attacker):
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.LINGER, 0 if sock is attacker and keyed else 5000)
        sock.connect(address)
    for rank in range(4):  # ranks that report every 30 s: alive throughout
        real.send(report(rank, interval=30.0))
    time.sleep(1.0)
    process = psutil.Process(recorder.pid)
    baseline = process.memory_info().rss
    peak = [baseline]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], process.memory_info().rss)

    sampler = threading.Thread(target=sample)
    sampler.start()
    messages = flood_messages()
    taken, after = 0, []
    for _ in range(ROUNDS):
        taken += flood(attacker, messages)
        time.sleep(3.0)
        after.append(process.memory_info().rss)
    done.set()
    sampler.join()
    real.close()
    attacker.close()
    context.term()
    recorder.send_signal(signal.SIGTERM)
    recorder.wait(30)
    summary = log.read_text().strip().splitlines()[-1]
    mode = "with a key" if keyed else "no key"
    rounds = " / ".join(f"{rss / MB:.0f}" for rss in after)
    return [
        f"| {mode} | {ROUNDS} x {len(messages):,} ({taken:,} taken by ZeroMQ) | {baseline / MB:.0f} MB "
        f"| {peak[0] / MB:.0f} MB | {rounds} MB | {summary.removeprefix('distmon record: ')} |"
    ]


def main() -> None:
    rows = [
        "| recorder | flood | RSS before | RSS peak | RSS after each round | summary line |",
        "|---|---|---|---|---|---|",
    ]
    for keyed in (False, True):
        with tempfile.TemporaryDirectory() as directory:
            rows += run(Path(directory), keyed)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
