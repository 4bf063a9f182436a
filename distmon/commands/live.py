"""The monitor of running ranks, as ``watch`` and ``record`` start and stop it: the warning for
an exposed endpoint, the responder, the monitor and its metrics port, over the channel to the
ranks that each command owns (a receiver, a live feed)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from distmon import values
from distmon.commands import acting, metrics_port
from distmon.endpoint import exposure_warning
from distmon.monitor.state.admission import MAX_WORLD

if TYPE_CHECKING:
    from distmon.actions.responder import Responder
    from distmon.channel import Command, Dump
    from distmon.monitor.monitor import Monitor
    from distmon.monitor.recording.file import RecordingWriter


class Channel(Protocol):
    def send(self, command: Command) -> int: ...

    def take_dumps(self) -> list[Dump]: ...

    def close(self) -> None: ...


@dataclass
class Live:
    monitor: Monitor
    responder: Responder
    metrics: metrics_port.Server | None

    def stop(self) -> str:
        """Stop serving metrics and send what is still queued; a few words for the closing line."""
        if self.metrics is not None:
            self.metrics.shutdown()
        return acting.close(self.responder)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of every command that runs a live monitor."""
    parser.add_argument(
        "--max-world",
        type=values.whole_option(1, 2**31 - 1),
        default=MAX_WORLD,
        metavar="N",
        help=f"largest world size followed; reports claiming more are refused (default: {MAX_WORLD:,})",
    )


def forward(args: argparse.Namespace) -> list[str]:
    """The options as given, for a monitor started as a child process (``distmon run``)."""
    return [] if args.max_world == MAX_WORLD else ["--max-world", str(args.max_world)]


def start(
    args: argparse.Namespace,
    channel: Channel,
    recorder: RecordingWriter | None,
    address: str,
    keyed: bool,
    job: str | None = None,
) -> Live:
    """Raises :class:`~distmon.commands.metrics_port.MetricsPortError`, the channel and the
    monitor closed."""
    from distmon.monitor.monitor import live_monitor

    warning = None if keyed else exposure_warning(address)
    if warning:
        print(warning, file=sys.stderr)
    responder = acting.responder(args, channel)
    monitor = live_monitor(recorder, job, responder, args.max_world)
    try:
        metrics = metrics_port.serve(args, monitor)
    except metrics_port.MetricsPortError:
        channel.close()
        monitor.close()
        raise
    return Live(monitor, responder, metrics)
