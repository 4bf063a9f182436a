"""``distmon record``: the headless monitor for batch jobs.

Binds the endpoint, runs the detector every second, writes every rank message and alert
change to the recording, and prints one line per alert on stderr for the job's log.
Stops on SIGINT or SIGTERM and closes the recording cleanly.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from types import FrameType

from distmon import endpoint, keys
from distmon.commands import acting, metrics_port
from distmon.commands.live import start
from distmon.monitor.alerts import Change
from distmon.monitor.monitor import Monitor
from distmon.monitor.receiver import EndpointError, Receiver
from distmon.monitor.recording import RecordingWriter

TICK = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="FILE", help="recording to write")
    parser.add_argument("--endpoint", help=f"where ranks connect (default: ${endpoint.ENV} or a local ipc socket)")
    parser.add_argument("--job", help="follow only this job id (default: the first job that reports)")
    metrics_port.add_argument(parser)
    keys.add_argument(parser)
    acting.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    stop = _stop_on_signals()  # first: a batch system's SIGTERM during start-up still closes cleanly
    address = endpoint.resolve(args.endpoint)
    try:
        key = keys.load_for(args.key_file)
    except keys.KeyFileError as e:
        print(f"distmon record: {e}", file=sys.stderr)
        return 2
    problem = acting.check(args, address, key is not None)
    if problem:
        print(f"distmon record: {problem}", file=sys.stderr)
        return 2
    try:
        recorder = RecordingWriter(args.out)
    except OSError as e:
        print(f"distmon record: cannot write {args.out}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        receiver = Receiver(address, key)
    except EndpointError as e:
        recorder.close()
        print(f"distmon record: {e}", file=sys.stderr)
        return 2
    try:
        live = start(args, receiver, recorder, address, key is not None, args.job)
    except metrics_port.MetricsPortError as e:
        print(f"distmon record: {e}", file=sys.stderr)
        return 2
    monitor = live.monitor
    secured = " with the job's key" if key else ""
    serving = f", metrics on port {args.metrics_port}" if live.metrics else ""
    print(
        f"distmon record: listening on {address}{secured}, recording to {args.out}{serving}",
        file=sys.stderr,
        flush=True,
    )
    try:
        next_tick = time.time() + TICK
        while not stop:
            for raw in receiver.receive(timeout=0.2):
                monitor.ingest(raw, time.time())
            monitor.state.dropped.update(receiver.take_refused())
            if time.time() >= next_tick:
                _tick(monitor)
                next_tick = time.time() + TICK
        for raw in receiver.receive(timeout=0.0):  # what arrived with the signal: last words
            monitor.ingest(raw, time.time())
        monitor.state.dropped.update(receiver.take_refused())
        _tick(monitor)
    finally:
        receiver.close()
        monitor.close()
        acted = live.stop()
    state = monitor.state
    dropped = ", ".join(f"{n} {why}" for why, n in sorted(state.dropped.items())) or "none"
    print(
        f"distmon record: {state.received} messages from {len(state.ranks)} ranks, "
        f"{len(monitor.alerts.history)} alerts, dropped: {dropped}{'; ' + acted if acted else ''}; wrote {args.out}",
        file=sys.stderr,
    )
    return acting.ENDED_JOB if live.responder.ended is not None else 0


def _tick(monitor: Monitor) -> None:
    for change in monitor.tick(time.time()):
        if change.event != "updated":
            print(alert_line(change), file=sys.stderr, flush=True)


def alert_line(change: Change) -> str:
    """One line per alert change, for a batch job's log."""
    a = change.alert
    stamp = time.strftime("%H:%M:%S", time.localtime(a.resolved if change.event == "resolved" else a.t))
    if change.event == "resolved":
        return f"distmon {stamp} resolved {a.kind}: {a.summary}"
    return f"distmon {stamp} {a.severity.upper()} {a.kind}: {a.summary}"


def _stop_on_signals() -> list[int]:
    """A list that becomes truthy when SIGINT or SIGTERM arrives."""
    received: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return received
