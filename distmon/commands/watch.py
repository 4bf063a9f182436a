"""``distmon watch``: bind the endpoint and show every rank and alert, live."""

from __future__ import annotations

import argparse
import sys

from distmon import keys
from distmon.commands import acting, metrics_port
from distmon.commands.live import add_arguments as add_monitor_arguments
from distmon.commands.live import start
from distmon.endpoint import ENV, resolve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint", help=f"where ranks connect (default: ${ENV}, else a per-user ipc socket)")
    parser.add_argument("--record", metavar="FILE", help="also record everything to FILE")
    metrics_port.add_argument(parser)
    keys.add_argument(parser)
    acting.add_arguments(parser)
    add_monitor_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from distmon.monitor.intake.feeds import LiveFeed
    from distmon.monitor.intake.receiver import EndpointError
    from distmon.monitor.recording.file import RecordingWriter

    try:
        key = keys.load_for(args.key_file)
    except keys.KeyFileError as e:
        print(f"distmon watch: {e}", file=sys.stderr)
        return 2
    address = resolve(args.endpoint)
    problem = acting.check(args, address, key is not None)
    if problem:
        print(f"distmon watch: {problem}", file=sys.stderr)
        return 2
    try:
        recorder = RecordingWriter(args.record) if args.record else None
    except OSError as e:
        print(f"distmon watch: cannot write {args.record}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        feed = LiveFeed(address, key=key)
    except EndpointError as e:
        if recorder is not None:
            recorder.close()
        print(f"distmon watch: {e}", file=sys.stderr)
        return 2
    try:
        live = start(args, feed, recorder, address, key is not None)
    except metrics_port.MetricsPortError as e:
        print(f"distmon watch: {e}", file=sys.stderr)
        return 2

    from distmon.tui.app import build_app

    build_app(feed, live.monitor).run()
    acted = live.stop()
    if acted:
        print(f"distmon watch: {acted}", file=sys.stderr)
    if recorder is not None and recorder.stopped:  # said while the screen was the TUI's: said again
        print(f"distmon watch: {recorder.stopped}", file=sys.stderr)
    return acting.ENDED_JOB if live.responder.ended is not None else 0
