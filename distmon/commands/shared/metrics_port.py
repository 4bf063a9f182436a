"""``--metrics-port PORT`` and ``--metrics-per-rank``, shared by ``watch``, ``record`` and
``run``: serve ``/metrics`` for Prometheus from the monitor, with every rank's own series at
any world size if asked (see :mod:`distmon.export.prometheus`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Protocol

from distmon.guards import values

if TYPE_CHECKING:
    from distmon.monitor.pipeline import Monitor


class MetricsPortError(Exception):
    """The port cannot be served; the message says why, in one line."""


class Server(Protocol):
    def shutdown(self) -> None: ...


def add_metrics_port_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        type=values.whole_option(1, 65535),
        metavar="PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics (every interface)",
    )
    parser.add_argument(
        "--metrics-per-rank",
        action="store_true",
        help="serve every rank's own series however large the job (by default, above 1024 ranks, "
        "only those of the ranks an active alert names)",
    )


def metrics_port_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options, in one line; None if nothing."""
    if args.metrics_per_rank and args.metrics_port is None:
        return "--metrics-per-rank goes with --metrics-port"
    return None


def forward_metrics_port(args: argparse.Namespace) -> list[str]:
    """The option as given, for a monitor started as a child process."""
    port = [] if args.metrics_port is None else ["--metrics-port", str(args.metrics_port)]
    return port + (["--metrics-per-rank"] if args.metrics_per_rank else [])


def serve_metrics(args: argparse.Namespace, monitor: Monitor) -> Server | None:
    """Start serving if asked; raises :class:`MetricsPortError` when the options are wrong
    (:func:`metrics_port_problem`) or the port cannot be bound."""
    problem = metrics_port_problem(args)
    if problem:
        raise MetricsPortError(problem)
    if args.metrics_port is None:
        return None
    from distmon.export.prometheus import serve

    try:
        return serve(monitor, args.metrics_port, per_rank=args.metrics_per_rank)
    except (OSError, OverflowError) as e:
        raise MetricsPortError(f"cannot serve metrics on port {args.metrics_port}: {e}") from None
