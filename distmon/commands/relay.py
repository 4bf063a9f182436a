"""``distmon relay``: a node's relay, between the node's ranks and the monitor.

    distmon relay --listen ipc:///tmp/distmon-node.sock --upstream tcp://head:5555
    distmon relay --find --upstream tcp://head:5555       # a job started without distmon

One per node: the node's ranks report to ``--listen`` (their ``DISTMON_ENDPOINT``), and the
relay sends their reports on to ``--upstream`` (``distmon record`` or ``watch``, or the relay
above it) in one batch a second, so that the monitor of a large job holds one connection per
node (:mod:`distmon.node.relay`). With ``--find`` it finds the ranks of a job started without
distmon on its node and reports for them (:mod:`distmon.node.found_ranks`). Stops on SIGINT,
SIGTERM or SIGHUP, after sending what it holds.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from distmon import endpoint, keys
from distmon.commands.shared import finding
from distmon.commands.shared.signals import stop_on_signals
from distmon.guards import values
from distmon.node.eye import NodeEye
from distmon.node.relay import BATCH_FRAMES, MAX_BATCH_FRAMES, NodeRelay


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        metavar="ENDPOINT",
        help="where this node's ranks connect: their DISTMON_ENDPOINT (an ipc:// socket, or tcp://); with --find, "
        f"by default ${endpoint.ENV}, else a per-user ipc socket, for a rank that attaches the hook later",
    )
    parser.add_argument(
        "--upstream",
        required=True,
        metavar="ENDPOINT",
        help="where the relay reports: the monitor's --endpoint, or the relay above this one",
    )
    parser.add_argument(
        "--interval",
        type=values.option(0.01, 60),
        default=1.0,
        metavar="SECONDS",
        help="send a batch this often (default: 1)",
    )
    parser.add_argument(
        "--batch",
        type=values.whole_option(1, MAX_BATCH_FRAMES),
        default=BATCH_FRAMES,
        metavar="N",
        help=f"send a batch sooner once it holds N reports (default: {BATCH_FRAMES})",
    )
    keys.add_key_file_argument(parser)
    finding.add_finding_arguments(parser, reach=False)


def run(args: argparse.Namespace) -> int:
    stop = stop_on_signals()
    problem = finding.problem(args)
    if args.listen is None and not args.find:
        problem = "--listen is needed: where this node's ranks connect (or --find, to find them from outside)"
    if problem is not None:
        print(f"distmon relay: {problem}", file=sys.stderr)
        return 2
    if args.find and (blind := finding.blind(args)):
        print(f"distmon relay: warning: {blind}", file=sys.stderr)
    args.listen = args.listen or endpoint.resolve(None)
    if args.listen == args.upstream:
        print("distmon relay: --upstream is --listen: the relay would send to itself", file=sys.stderr)
        return 2
    try:
        key = keys.load_for(args.key_file)
    except keys.KeyFileError as e:
        print(f"distmon relay: {e}", file=sys.stderr)
        return 2
    try:
        eye = NodeEye(find=args.find, pick=args.pid)
        relay = NodeRelay(args.listen, args.upstream, key, args.interval, args.batch, eye=eye)
    except endpoint.EndpointError as e:
        print(f"distmon relay: {e}", file=sys.stderr)
        return 2
    warning = None if key else endpoint.exposure_warning(args.listen)
    if warning:
        print(warning, file=sys.stderr)
    secured = " with the job's key" if key else ""
    print(
        f"distmon relay: listening on {args.listen}{secured}, forwarding to {args.upstream} as {relay.me.id}",
        file=sys.stderr,
        flush=True,
    )
    try:
        relay.run(lambda: bool(stop))
    finally:
        relay.close()
    print(f"distmon relay: {closing_line(relay.counts + Counter(relay.eye.counts))}", file=sys.stderr)
    return 0


def closing_line(counts: dict[str, int]) -> str:
    """The closing line: what went up and down, and what was dropped."""
    sent = (
        f"{counts.get('frames', 0)} reports in {counts.get('batches', 0)} batches "
        f"({counts.get('whole', 0)} of them whole), "
        f"{counts.get('dumps', 0)} dumps up, {counts.get('commands', 0)} commands down, "
        f"{counts.get('looks', 0)} looks and {counts.get('stacks', 0)} stacks taken on its node"
    )
    done = {"frames", "batches", "whole", "dumps", "commands", "asked", "looks_asked", "looks", "stacks"}
    dropped = ", ".join(f"{n} {why}" for why, n in sorted(counts.items()) if why not in done and n) or "none"
    return f"{sent}; dropped: {dropped}"
