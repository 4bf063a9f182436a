"""``distmon watch``: bind the endpoint and show every rank and alert, live; or, with
``--attach``, show a monitor already running elsewhere (``distmon record``, ``watch``, ``run``),
binding nothing and changing nothing in it."""

from __future__ import annotations

import argparse
import sys

from distmon import keys
from distmon.commands.shared import acting, finding, metrics_port
from distmon.commands.shared.live import add_monitor_arguments as add_monitor_arguments
from distmon.commands.shared.live import open_live
from distmon.endpoint import ENV

ATTACH_TIMEOUT = 10.0
"""Seconds a screen waits for the monitor's first answer: a monitor answers at its next tick."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--attach",
        nargs="?",
        const="",
        metavar="ENDPOINT",
        help=f"show the monitor already running for the ranks at ENDPOINT (default: ${ENV}, else a "
        "per-user ipc socket): its alerts and verdicts, live; binds nothing the ranks use, changes nothing",
    )
    parser.add_argument("--endpoint", help=f"where ranks connect (default: ${ENV}, else a per-user ipc socket)")
    parser.add_argument("--record", metavar="FILE", help="also record everything to FILE")
    metrics_port.add_metrics_port_argument(parser)
    keys.add_key_file_argument(parser)
    acting.add_acting_arguments(parser)
    add_monitor_arguments(parser)
    finding.add_finding_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.attach is not None:
        return _attach(args)
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


def _attach(args: argparse.Namespace) -> int:
    """The screen of a monitor running elsewhere: the same app, fed from that monitor."""
    from distmon.endpoint import EndpointError, resolve

    problem = _monitor_option(args)
    if problem is None:
        try:
            key = keys.load_for(args.key_file)
        except keys.KeyFileError as e:
            problem = str(e)
    if problem is not None:
        print(f"distmon watch: {problem}", file=sys.stderr)
        return 2

    from distmon.monitor.attach.feed import AttachedFeed

    try:
        feed = AttachedFeed(resolve(args.attach or None), key)
    except EndpointError as e:
        print(f"distmon watch: {e}", file=sys.stderr)
        return 2
    problem = feed.attach(ATTACH_TIMEOUT)
    if problem is not None:
        feed.close()
        print(f"distmon watch: {problem}", file=sys.stderr)
        return 2

    from distmon.monitor.attach.follow import AttachedMonitor
    from distmon.monitor.overview import OverviewTracker
    from distmon.tui.app import build_app

    build_app(feed, AttachedMonitor(feed), OverviewTracker(feed.progress)).run()
    return 0


def _monitor_option(args: argparse.Namespace) -> str | None:
    """An option given that belongs to the monitor attached to, not to its screen; in words."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    defaults = vars(parser.parse_args([]))
    for name, value in vars(args).items():
        if name in defaults and name not in ("attach", "key_file") and value != defaults[name]:
            option = "--" + name.replace("_", "-")
            return f"{option} is the monitor's own option: a screen attached with --attach shows the monitor as it runs"
    return None
