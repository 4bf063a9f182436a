"""``distmon replay``: play a recording through the terminal UI, as if live."""

from __future__ import annotations

import argparse
import math
import sys


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


def run(args: argparse.Namespace) -> int:
    from distmon.monitor.feeds import ReplayFeed
    from distmon.monitor.recording import RecordingError

    try:
        feed = ReplayFeed(args.file, speed=args.speed)
    except RecordingError as e:
        print(f"distmon replay: {e}", file=sys.stderr)
        return 2
    if args.paused:
        feed.pause()

    from distmon.tui.app import build_app

    build_app(feed).run()
    return 0
