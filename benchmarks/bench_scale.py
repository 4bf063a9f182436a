"""The monitor at scale: simulated ranks reporting through real relay processes to a monitor
in this process, one rank stalled.

    .venv/bin/python benchmarks/bench_scale.py --ranks 8192 [--relays 4] [--json]

Sender processes stand in for the ranks: each pre-encodes its ranks' reports from the
simulator (a healthy second, then a second of the hang) and sends them, their clocks moved on
each second, one message per rank per second, to the relay of the rank's node. The relays
(``distmon relay``) batch them to the monitor, which runs as ``distmon record`` does (a
LiveFeed and the Session), recording to ``--record FILE`` if asked. With ``--json`` the last
line is one JSON object: ``ranks``, ``relays``, ``reports_per_s`` (rank reports the monitor
took in per second, sustained), ``offered`` and ``taken`` (reports sent by the senders in all,
and taken in by the monitor), ``cpu_us_per_report`` (the monitor's own process CPU time, every
thread of it, per report taken in, over the steady seconds), ``core_share`` (that CPU over the
wall time: the share of one core the monitor used) and ``headroom`` (one over it),
``tick_ms_median`` and ``tick_ms_max`` (detector ticks during the hang, wall time), and
``tick_cpu_ms_median`` and ``tick_cpu_ms_max`` (the same ticks' CPU time: what they cost with
the machine to themselves), ``alert_s`` (stall to
the first alert naming a culprit, or null), ``named`` (the ranks it names), ``monitor_rss_mb``
(its peak resident memory), ``dropped`` (reports the monitor's intake dropped, past its caps),
``refused`` (everything the monitor counted as not taken in, by reason), ``cpu_s_by_thread``
(the process's CPU over the run: its loop, the feed's reader, ZeroMQ's), ``load`` (the host's
load average at the start and the end) and ``said`` (every alert raised or resolved).

The monitor shares the machine with the senders and the relays: its CPU per report is its
own process's CPU time, which the others' load does not add to (it only delays it).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import psutil
import zmq
from simulated import SimJob

from distmon.cli import relax_gc
from distmon.monitor.intake.feeds import LiveFeed
from distmon.monitor.pipeline import Monitor, Screens
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.session import Session
from distmon.monitor.state.ending import HUNG_KINDS
from distmon.node.eye import NodeEye
from distmon.wire import HEADER_FIELDS, encode

HANG_AT = 20.0
"""The simulated job's second at which the culprit stalls."""
HUNG = HANG_AT + 1
"""The simulated second whose reports are sent once the hang begins: one second into it."""


def _offset(field: str) -> int:
    """Where a field lies in a frame's header."""
    before = [name for name, _ in HEADER_FIELDS].index(field)
    return struct.calcsize("<" + "".join(code for _, code in HEADER_FIELDS[:before]))


T_OFFSET, INTERVAL_OFFSET = _offset("t"), _offset("interval")


def culprit(ranks: int) -> int:
    return ranks // 3


Templates = list[list[tuple[int, bytearray, float]]]


def templates(ranks: Iterable[int], world: int, interval: int) -> Templates:
    """``ranks``' reports pre-encoded, with the interval ``DISTMON_INTERVAL`` would give them:
    (rank, frame, t) of a healthy second, and of a second into the hang of :func:`culprit`."""
    sim = SimJob(world=world, ranks_per_host=8).hang(culprit(world), at=HANG_AT)
    seconds: Templates = [[], []]
    for rank in ranks:
        for frames, second in zip(seconds, (HANG_AT - 1, HUNG), strict=True):
            report = sim.report(rank, sim.start + second + (rank % 1000) / 1000)
            if report is not None:
                frame = bytearray(encode(report))
                struct.pack_into("<d", frame, INTERVAL_OFFSET, float(interval))
                frames.append((rank, frame, report.t))
    return seconds


def second(seconds: Templates, k: int, healthy: int, interval: int) -> Iterator[tuple[int, bytearray]]:
    """The frames sent in second ``k``: each rank's every ``interval`` seconds, the healthy
    one until ``healthy`` seconds have passed, the hung one after, ``t`` moved on by the
    seconds since so that the ranks' clocks run on evenly into the hang (the healthy second
    is the simulation's ``HUNG - 2``, sent until the second before the hung one: a clock set
    back there made every report look late to the monitor, which then named no one). Each
    frame is stamped in place: send it before the next second."""
    frames, since = (seconds[0], healthy - 2) if k < healthy else (seconds[1], healthy)
    for rank, frame, t in frames:
        if rank % interval == k % interval:
            struct.pack_into("<d", frame, T_OFFSET, t + k - since)
            yield rank, frame


def sender(
    ranks: list[int], world: int, relays: list[str], seconds: int, healthy: int, start: float, interval: int
) -> None:
    """Pre-encode ``ranks``' reports, then from ``start`` send each rank's every ``interval``
    seconds to the relay of its node."""
    encoded = templates(ranks, world, interval)
    context = zmq.Context()
    sockets = []
    for address in relays:
        socket = context.socket(zmq.DEALER)
        socket.setsockopt(zmq.SNDHWM, 1_000_000)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(address)
        sockets.append(socket)
    per_relay = max(1, -(-world // len(relays)))
    time.sleep(max(0.0, start - time.time()))
    for k in range(seconds):
        for rank, frame in second(encoded, k, healthy, interval):
            sockets[rank // per_relay].send(frame, copy=False)
        time.sleep(max(0.0, start + k + 1 - time.time()))
    for socket in sockets:
        socket.close()
    context.term()


def run(
    ranks: int,
    relays: int,
    senders: int,
    healthy: int,
    hung: int,
    interval: int,
    screens: Callable[[str], Screens] | None = None,
    on_turn: Callable[[], None] | None = None,
    record: str | None = None,
) -> dict[str, object]:
    """``screens``: the monitor's screens, made for its endpoint (``bench_attach.py``); ``on_turn``
    called at each turn of the monitor's loop; ``record``: the recording, if any."""
    relax_gc()
    load = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    upstream = f"ipc://{tmp}/monitor.sock"
    listens = [f"ipc://{tmp}/relay-{i}.sock" for i in range(relays)]
    seconds = healthy + hung
    start = time.time() + 8 + ranks / 4000  # the senders pre-encode their ranks' reports first
    workers = [
        multiprocessing.get_context("fork").Process(
            target=sender, args=(list(range(i, ranks, senders)), ranks, listens, seconds, healthy, start, interval)
        )
        for i in range(senders)
    ]
    for worker in workers:
        worker.start()
    feed = LiveFeed(upstream, eye=NodeEye())  # as distmon record runs it: the relays' eyes are theirs
    relay_processes = [
        subprocess.Popen(
            [sys.executable, "-m", "distmon", "relay", "--listen", listen, "--upstream", upstream],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for listen in listens
    ]
    monitor = Monitor(
        recorder=RecordingWriter(record) if record else None, screens=screens(upstream) if screens is not None else None
    )
    ticks: list[tuple[float, float, float]] = []
    tick = monitor.tick

    def timed(now: float) -> list:  # type: ignore[type-arg]
        began, cpu = time.perf_counter(), time.thread_time()
        changes = tick(now)
        ticks.append((now, (time.perf_counter() - began) * 1000, (time.thread_time() - cpu) * 1000))
        return changes

    monitor.tick = timed  # type: ignore[method-assign]
    session = Session(feed, monitor)
    stalled_at = start + healthy - (HUNG - HANG_AT)
    counted: list[tuple[float, int, float]] = []
    """(time, reports taken in, the process's CPU seconds)"""
    alert: tuple[float, list[int]] | None = None
    said: list[str] = []
    """Every alert raised, in one line each."""
    try:
        while time.time() < start + seconds + 2:
            for t, change in session.run_timed(limit=50_000):
                if change.event != "updated":
                    said.append(f"+{t - start:.0f}s {change.event} {change.alert.headline[:160]}")
                if alert is None and change.event == "raised" and change.alert.kind in HUNG_KINDS:
                    alert = (t, change.alert.ranks)
            counted.append((time.time(), monitor.state.received, time.process_time()))
            if on_turn is not None:
                on_turn()
            time.sleep(0.01)
        session.finish()
        spent = by_thread()
    finally:
        for worker in workers:
            worker.join(30)
        for process in relay_processes:
            process.terminate()
            process.wait(10)
        session.close()
    steady = [(t, n, cpu) for t, n, cpu in counted if start + 2 <= t <= start + seconds]
    (t0, n0, cpu0), (t1, n1, cpu1) = (steady[0], steady[-1]) if len(steady) > 1 else ((0, 0, 0), (1, 0, 0))
    during = [ms for t, ms, _ in ticks if t >= start + healthy + 1]
    during_cpu = [ms for t, _, ms in ticks if t >= start + healthy + 1]
    share = (cpu1 - cpu0) / (t1 - t0)
    return {
        "ranks": ranks,
        "relays": relays,
        "interval": interval,
        "reports_per_s": round((n1 - n0) / (t1 - t0)),
        "offered": ranks * seconds // interval,
        "taken": monitor.state.received,
        "cpu_us_per_report": round((cpu1 - cpu0) / max(1, n1 - n0) * 1e6, 2),
        "core_share": round(share, 3),
        "headroom": round(1 / share, 1) if share else None,
        "tick_ms_median": round(statistics.median(during), 1) if during else None,
        "tick_ms_max": round(max(during), 1) if during else None,
        "tick_cpu_ms_median": round(statistics.median(during_cpu), 1) if during_cpu else None,
        "tick_cpu_ms_max": round(max(during_cpu), 1) if during_cpu else None,
        "alert_s": round(alert[0] - stalled_at, 1) if alert else None,
        "named": alert[1] if alert else [],
        "monitor_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "dropped": feed.dropped,
        "refused": dict(monitor.state.dropped),
        "cpu_s_by_thread": spent,
        "load": [round(load, 2), round(os.getloadavg()[0], 2)],
        "said": said,
    }


def by_thread() -> dict[str, float]:
    """This process's CPU seconds so far, by thread: the monitor's loop, the feed's reader, and
    ZeroMQ's own (the socket's I/O)."""
    names = {t.native_id: "feed" for t in threading.enumerate() if t.name == "distmon-feed"}
    names[threading.main_thread().native_id] = "loop"
    spent: dict[str, float] = {}
    for thread in psutil.Process().threads():
        name = names.get(thread.id, "zmq and others")
        spent[name] = round(spent.get(name, 0.0) + thread.user_time + thread.system_time, 2)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=8192)
    parser.add_argument("--relays", type=int, default=4, help="relay processes (default: 4)")
    parser.add_argument("--senders", type=int, default=2, help="processes standing in for the ranks (default: 2)")
    parser.add_argument("--healthy", type=int, default=5, help="seconds of the healthy job first (default: 5)")
    parser.add_argument("--hung", type=int, default=20, help="seconds of the hang (default: 20)")
    parser.add_argument(
        "--interval", type=int, default=1, help="seconds between a rank's reports, DISTMON_INTERVAL (default: 1)"
    )
    parser.add_argument("--record", metavar="FILE", help="record what the monitor takes in, as distmon record does")
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = parser.parse_args()
    result = run(args.ranks, args.relays, args.senders, args.healthy, args.hung, args.interval, record=args.record)
    print("| " + " | ".join(result) + " |")
    print("|" + "---|" * len(result))
    said = result.pop("said")
    print("| " + " | ".join(str(v) if k != "named" else str(v[:8]) for k, v in result.items()) + " |")
    print("Alerts raised and resolved:", *said, sep="\n  ")
    result["said"] = said
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
