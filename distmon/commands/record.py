"""``distmon record``: the headless monitor for batch jobs.

Binds the endpoint, runs the monitor's one driver (:class:`~distmon.monitor.session.Session`)
on the live feed, writes every rank message and alert change to the recording, and prints one
line per alert on stderr for the job's log. Stops on SIGINT, SIGTERM or SIGHUP and closes the
recording cleanly.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterable

from distmon import endpoint, keys
from distmon.commands.shared import acting, finding, metrics_port
from distmon.commands.shared.live import add_monitor_arguments as add_monitor_arguments
from distmon.commands.shared.live import open_live
from distmon.commands.shared.signals import stop_on_signals
from distmon.export.plain import alert_line
from distmon.monitor.session import Session
from distmon.monitor.state.alerts import Change
from distmon.monitor.state.words import count, dropped_words, unwatched_words

POLL = 0.05
"""Seconds between turns of the loop: the feed's reader thread queues what arrives."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="FILE", help="recording to write")
    parser.add_argument("--endpoint", help=f"where ranks connect (default: ${endpoint.ENV} or a local ipc socket)")
    parser.add_argument("--job", help="follow only this job id (default: the first job that reports)")
    metrics_port.add_metrics_port_argument(parser)
    keys.add_key_file_argument(parser)
    acting.add_acting_arguments(parser)
    add_monitor_arguments(parser)
    finding.add_finding_arguments(parser)


def run(args: argparse.Namespace) -> int:
    stop = stop_on_signals()  # first: a batch system's SIGTERM during start-up still closes cleanly
    live = open_live(args, "record", args.out, args.job)
    if live is None:
        return 2
    feed, monitor = live.feed, live.monitor
    session = Session(feed, monitor)
    secured = " with the job's key" if live.keyed else ""
    serving = f", metrics on port {args.metrics_port}" if live.metrics else ""
    try:
        _say(f"distmon record: listening on {live.address}{secured}, recording to {args.out}{serving}")
        while not stop:
            _log(session.drain())
            time.sleep(POLL)
        feed.settle()  # what arrived with the signal: last words
        _log(session.finish())
    finally:
        session.close()
        acted = live.stop()
    state = monitor.state
    dropped = dropped_words(state.dropped) or "none"
    unwatched = unwatched_words(state.unwatched)
    _say(
        f"distmon record: {count(state.received, 'message')} from {count(len(state.ranks), 'rank')}, "
        f"{count(len(monitor.alerts.history), 'alert')}, dropped: {dropped}"
        f"{'; not watched: ' + unwatched if unwatched else ''}{'; ' + acted if acted else ''}; "
        f"wrote {args.out}"
    )
    return acting.ENDED_JOB if live.responder.ended is not None else 0


def _log(changes: Iterable[tuple[float, Change]]) -> None:
    for t, change in changes:
        if (line := alert_line(change, t)) is not None:
            _say(line)


def _say(line: str) -> None:
    """A line on stderr, if it can still be written: a terminal gone (SIGHUP) or a pipe closed
    costs the lines, never the recording or its closing tick."""
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr, flush=True)
