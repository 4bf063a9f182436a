"""``distmon watch``: bind the endpoint and show every rank and alert, live."""

from __future__ import annotations

import argparse
import sys

from distmon import keys
from distmon.commands import acting, metrics_port
from distmon.commands.live import add_arguments as add_monitor_arguments
from distmon.commands.live import open_live
from distmon.endpoint import ENV


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint", help=f"where ranks connect (default: ${ENV}, else a per-user ipc socket)")
    parser.add_argument("--record", metavar="FILE", help="also record everything to FILE")
    metrics_port.add_argument(parser)
    keys.add_argument(parser)
    acting.add_arguments(parser)
    add_monitor_arguments(parser)


def run(args: argparse.Namespace) -> int:
    live = open_live(args, "watch", args.record or None)
    if live is None:
        return 2

    from distmon.tui.app import build_app

    build_app(live.feed, live.monitor).run()
    acted = live.stop()
    if acted:
        print(f"distmon watch: {acted}", file=sys.stderr)
    if live.recorder is not None and live.recorder.stopped:  # said while the screen was the TUI's: said again
        print(f"distmon watch: {live.recorder.stopped}", file=sys.stderr)
    return acting.ENDED_JOB if live.responder.ended is not None else 0
