"""``--evidence``, ``--notify``, ``--on-alert`` and ``--abort-on-hang``, shared by ``watch``,
``record`` and ``run``: what the monitor does about its alerts (see :mod:`distmon.actions`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from distmon.endpoint import exposure_warning
from distmon.guards import values
from distmon.monitor.state.words import count

if TYPE_CHECKING:
    from distmon.actions.responder import Connection, Responder

ENDED_JOB = 3
"""Exit status of a monitor that ended its job (``--abort-on-hang``)."""
CLOSE_WAIT = 5.0
"""Seconds the notifications still queued at exit get to go out."""
UNSAFE_ABORT = (
    "--abort-on-hang on {address} without a key would let anyone who reaches that port end the job "
    "with fake reports: add --key-file (see distmon keygen), or listen on a loopback address"
)


class ActingError(Exception):
    """An option that cannot be acted on; the message says why, in one line."""


def add_acting_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--evidence",
        metavar="DIR",
        help="keep each critical alert's evidence (stacks, reports, Flight Recorder dumps) in DIR",
    )
    parser.add_argument(
        "--notify",
        metavar="URL",
        help="POST each alert change as JSON to URL (a Slack or Mattermost incoming webhook works as it is)",
    )
    parser.add_argument("--on-alert", metavar="CMD", help="run CMD with each alert change as JSON on its stdin")
    parser.add_argument(
        "--notify-level",
        choices=("critical", "warning"),
        default="critical",
        help="the alerts --notify and --on-alert tell: critical ones and their resolution (the default), "
        "or warnings too",
    )
    parser.add_argument(
        "--abort-on-hang",
        type=values.option(0, 7 * 24 * 3600),
        metavar="SECONDS",
        help="once a hang, divergence or rank_lost alert has stood SECONDS, keep the evidence and end "
        "the job's ranks, so that the launcher's restart policy takes over",
    )


def acting_problem(args: argparse.Namespace, address: str | None = None, keyed: bool = False) -> str | None:
    """What is wrong with the options for a monitor on ``address``, in one line; None if nothing."""
    if args.abort_on_hang is not None and address is not None and not keyed and exposure_warning(address):
        return UNSAFE_ABORT.format(address=address)
    if args.notify is not None:
        from distmon.actions.notify import check_url

        problem = check_url(args.notify)
        if problem:
            return problem
    if args.evidence is not None:
        from distmon.actions.bundles import EvidenceStore

        return EvidenceStore(args.evidence).check()
    return None


def acting_wanted(args: argparse.Namespace) -> bool:
    return any(getattr(args, name) is not None for name in ("evidence", "notify", "on_alert", "abort_on_hang"))


def forward_acting(args: argparse.Namespace) -> list[str]:
    """The options as given, for a monitor started as a child process."""
    out: list[str] = []
    for option, value in (
        ("--evidence", args.evidence),
        ("--notify", args.notify),
        ("--on-alert", args.on_alert),
        ("--abort-on-hang", args.abort_on_hang),
    ):
        if value is not None:
            out += [option, str(value)]
    if args.notify_level != "critical":
        out += ["--notify-level", args.notify_level]
    return out


def responder(args: argparse.Namespace, channel: Connection) -> Responder:
    """The responder the options ask for; raises :class:`ActingError`."""
    from distmon.actions.bundles import EvidenceStore
    from distmon.actions.notify import Notifications
    from distmon.actions.responder import Responder

    problem = acting_problem(args)
    if problem:
        raise ActingError(problem)
    return Responder(
        channel,
        evidence=EvidenceStore(args.evidence) if args.evidence is not None else None,
        notifications=Notifications(args.notify, args.on_alert, level=args.notify_level),
        abort_after=args.abort_on_hang,
    )


def close(responder: Responder) -> str:
    """Send what is still queued; returns a few words for the closing line."""
    parts = []
    responder.close(CLOSE_WAIT)
    if responder.notifications:
        responder.notifications.close(wait=CLOSE_WAIT)
        parts.append(responder.notifications.summary())
    if responder.written:
        parts.append(f"evidence: {count(len(responder.written), 'bundle')}")
    if responder.ended is not None:
        parts.append(f"ended the job because of {responder.ended.alert.kind}")
    return "; ".join(parts)
