"""``distmon replay``: play a recording through the terminal UI, as if live; or, with
``--headless``, run the detector over it again and print the alerts it raises, one line each
as ``distmon record`` does, or with ``--json`` as ``distmon report --json`` prints them.

Both go through the monitor's one driver (:class:`~distmon.monitor.session.Session`), so a replay
raises what the live monitor raised, at the same moments (within a tick where the live
monitor could see processes and stacks a recording does not hold).

Without a terminal (output into a pipe or a file) it replays headless, as ``--headless``
does. Damage inside the recording (records skipped, a file cut mid-record) is one line on
stderr at the end; a silence over an hour with no record is played as an hour.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distmon.monitor.intake.feeds import ReplayFeed


def speed(value: str) -> float:
    if value in ("max", "inf"):
        return math.inf
    try:
        factor = float(value.removesuffix("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a speed: {value!r} (try 1, 10x or max)") from None
    if not factor > 0:
        raise argparse.ArgumentTypeError(f"speed must be positive, not {value!r}")
    return factor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a recording made by distmon record or distmon watch --record")
    parser.add_argument("--speed", type=speed, default=1.0, help="1 (real time, default), 10x, or max")
    parser.add_argument("--paused", action="store_true", help="start paused (space plays)")
    parser.add_argument(
        "--headless", action="store_true", help="no UI: run the detector over the recording, print its alerts"
    )
    parser.add_argument("--json", action="store_true", help="with --headless: the alerts as distmon report --json")


def run(args: argparse.Namespace) -> int:
    from distmon.monitor.intake.feeds import ReplayFeed
    from distmon.monitor.recording.reader import RecordingError

    if args.json and not args.headless:
        print("distmon replay: --json goes with --headless", file=sys.stderr)
        return 2
    headless = args.headless or not (sys.stdin.isatty() and sys.stdout.isatty())
    try:
        feed = ReplayFeed(args.file, speed=math.inf if headless else args.speed)
    except RecordingError as e:
        print(f"distmon replay: {e}", file=sys.stderr)
        return 2
    if headless:
        code = _headless(feed, args.json)
    else:
        if args.paused:
            feed.pause()

        from distmon.tui.app import build_app

        build_app(feed).run()
        code = 0
    for line in feed.trouble():
        print(f"distmon replay: {line}", file=sys.stderr)
    return code


def _headless(feed: ReplayFeed, as_json: bool) -> int:
    from distmon.export.plain import alert_line
    from distmon.monitor.pipeline import Monitor
    from distmon.monitor.session import Session

    monitor = Monitor()
    session = Session(feed, monitor)
    changes = session.finish()
    for t, change in changes:
        if not as_json and (line := alert_line(change, t)) is not None:
            print(line)
    session.close()
    if as_json:
        json.dump([a.to_json() for a in monitor.alerts.history], sys.stdout, indent=2)
        print()
    return 0
