"""``--metrics-port PORT``, shared by ``watch``, ``record`` and ``run``: serve ``/metrics``
for Prometheus from the monitor (see :mod:`distmon.export.prometheus`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from distmon.monitor.monitor import Monitor


class MetricsPortError(Exception):
    """The port cannot be served; the message says why, in one line."""


class Server(Protocol):
    def shutdown(self) -> None: ...


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics (every interface)",
    )


def forward(args: argparse.Namespace) -> list[str]:
    """The option as given, for a monitor started as a child process."""
    return [] if args.metrics_port is None else ["--metrics-port", str(args.metrics_port)]


def serve(args: argparse.Namespace, monitor: Monitor) -> Server | None:
    """Start serving if asked; raises :class:`MetricsPortError` when the port cannot be bound."""
    if args.metrics_port is None:
        return None
    from distmon.export.prometheus import serve

    try:
        return serve(monitor, args.metrics_port)
    except (OSError, OverflowError) as e:
        raise MetricsPortError(f"cannot serve metrics on port {args.metrics_port}: {e}") from None
