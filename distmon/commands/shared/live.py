"""The monitor of running ranks, as ``watch`` and ``record`` start and stop it: the job's key and
the options checked, the recording opened, the live feed bound on the endpoint, where screens
attach to it, the warning for an exposed endpoint, the responder, the monitor and its metrics
port."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from distmon import keys
from distmon.commands.shared import acting, finding, metrics_port
from distmon.endpoint import exposure_warning, resolve
from distmon.guards import values
from distmon.monitor.state.admission import MAX_WORLD
from distmon.node.eye import NodeEye
from distmon.reach.eyes import Eyes
from distmon.reach.plan import Plan, ReachError, from_job, given, reach

FIRST_SCAN = 10.0
"""Seconds to wait for the first scan of this host, to learn the other nodes of a job found here."""

if TYPE_CHECKING:
    from distmon.actions.responder import Responder
    from distmon.monitor.attach.serve import AttachServer
    from distmon.monitor.intake.feeds import LiveFeed
    from distmon.monitor.pipeline import Monitor
    from distmon.monitor.recording.writer import RecordingWriter


@dataclass
class Live:
    """A live monitor started: where it listens, with the job's key or without, its feed, the
    recording it writes (if any), the monitor, its responder and its metrics port."""

    address: str
    keyed: bool
    feed: LiveFeed
    recorder: RecordingWriter | None
    monitor: Monitor
    responder: Responder
    metrics: metrics_port.Server | None
    eyes: Eyes | None = None
    """The eyes started on the job's other nodes (``--find`` reaching them), if any."""

    def stop(self) -> str:
        """End the eyes on other nodes, stop serving metrics and send what is still queued; a
        few words for the closing line."""
        if self.eyes is not None:
            self.eyes.close()
        if self.metrics is not None:
            self.metrics.shutdown()
        return acting.close(self.responder)


def add_monitor_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of every command that runs a live monitor."""
    parser.add_argument(
        "--max-world",
        type=values.whole_option(1, 2**31 - 1),
        default=MAX_WORLD,
        metavar="N",
        help=f"largest world size followed; reports claiming more are refused (default: {MAX_WORLD:,})",
    )


def forward_monitor(args: argparse.Namespace) -> list[str]:
    """The options as given, for a monitor started as a child process (``distmon run``)."""
    return [] if args.max_world == MAX_WORLD else ["--max-world", str(args.max_world)]


def open_live(args: argparse.Namespace, command: str, recording: str | None, job: str | None = None) -> Live | None:
    """The start-up of ``distmon {command}``: the job's key, the options checked, the recording
    (to the path ``recording``, if given), the feed bound on the endpoint, then the monitor. None
    where a step fails, said in one line on stderr and what was opened closed."""
    try:
        return _open(args, command, recording, job)
    except _Refused as e:
        print(f"distmon {command}: {e}", file=sys.stderr)
        return None


class _Refused(Exception):
    """A step of the start-up failed: why, in a few words."""


def _open(args: argparse.Namespace, command: str, recording: str | None, job: str | None) -> Live:
    from distmon.monitor.intake.feeds import LiveFeed
    from distmon.monitor.intake.receiver import EndpointError
    from distmon.monitor.recording.writer import RecordingWriter

    address = resolve(args.endpoint)
    try:
        key = keys.load_for(args.key_file)
    except keys.KeyFileError as e:
        raise _Refused(e) from None
    problem = acting.acting_problem(args, address, key is not None) or finding.problem(args)
    if problem:
        raise _Refused(problem)
    if args.find and (blind := finding.blind(args)):
        print(f"distmon {command}: warning: {blind}", file=sys.stderr)
    try:
        recorder = RecordingWriter(recording) if recording is not None else None
    except OSError as e:
        raise _Refused(f"cannot write {recording}: {e.strerror}") from None
    eye = NodeEye(find=args.find, pick=args.pid, job=job)  # watch's and record's
    plan = _plan(args, eye, job)
    eyes_key = keys.fresh() if plan else None
    try:
        feed = LiveFeed(address, key=key, eye=eye, eyes=eyes_key)
    except EndpointError as e:
        eye.close()
        if recorder is not None:
            recorder.close()
        raise _Refused(e) from None
    try:
        live = _start(args, feed, recorder, address, key is not None, job, _attach_server(command, address, key))
    except metrics_port.MetricsPortError as e:
        raise _Refused(e) from None
    if plan and eyes_key is not None and feed.eyes_port is not None:
        live.eyes = Eyes(feed.eyes_port, eyes_key, job, [sys.executable, "python3"])
        eye.reaching = live.eyes
        threading.Thread(target=reach, args=(live.eyes, plan), name="distmon-reach-start", daemon=True).start()
    return live


def _plan(args: argparse.Namespace, eye: NodeEye, job: str | None) -> Plan | None:
    """The nodes to reach: those named; else, finding a job here that runs on other nodes too,
    those it tells of (unless ``--here``). Raises :class:`_Refused`."""
    if not args.find:
        return None
    try:
        plan = given(args.slurm, args.hosts, args.hostfile)
    except ReachError as e:
        raise _Refused(e) from None
    if plan is not None or args.here or eye.found is None:
        return plan
    began = time.monotonic()
    while eye.found.scans == 0 and time.monotonic() - began < FIRST_SCAN:
        time.sleep(0.05)
    jobs = eye.found.found.jobs
    mine = job if job is not None else next(iter(jobs), None) if len(jobs) == 1 else None
    here = jobs.get(mine, []) if mine is not None else []
    if mine is None or max((r.world for r in here), default=0) <= len(here):
        return None
    return from_job(mine, eye.found.hosts_of(mine)) or None


def _attach_server(command: str, address: str, key: keys.JobKey | None) -> AttachServer | None:
    """Where screens attach (``distmon watch --attach``); a monitor whose screens cannot attach
    says so in one line and watches on."""
    from distmon.endpoint import EndpointError
    from distmon.monitor.attach.serve import AttachServer

    try:
        return AttachServer(address, key)
    except EndpointError as e:
        print(f"distmon {command}: warning: no screen can attach: {e}", file=sys.stderr)
        return None


def _start(
    args: argparse.Namespace,
    feed: LiveFeed,
    recorder: RecordingWriter | None,
    address: str,
    keyed: bool,
    job: str | None,
    screens: AttachServer | None,
) -> Live:
    """Raises :class:`~distmon.commands.shared.metrics_port.MetricsPortError`, the feed and the
    monitor closed."""
    from distmon.monitor.pipeline import live_monitor

    warning = None if keyed else exposure_warning(address)
    if warning:
        print(warning, file=sys.stderr)
    responder = acting.responder(args, feed)
    monitor = live_monitor(recorder, job, responder, args.max_world, screens)
    try:
        metrics = metrics_port.serve_metrics(args, monitor)
    except metrics_port.MetricsPortError:
        feed.close()
        monitor.close()
        raise
    return Live(address, keyed, feed, recorder, monitor, responder, metrics)
