"""``distmon look``: a job running on this host without distmon, judged from outside in a few
seconds, with nothing in it changed.

It finds the job's ranks (their launchers' variables: torchrun, ``srun``, ``mpirun``; see
:mod:`distmon.node.finder`), looks at them for ``--seconds`` as ``distmon watch --find``
would (their stacks with py-spy, their processes in ``/proc``), and prints what
``distmon report`` prints of a recording, first cause on top, or with ``--json`` the alerts
as ``report --json`` does. The monitor is the live one, the same rules and words; what it saw
is recorded to a temporary file and read back as ``report`` reads any recording (``--out``
keeps it).

Exit codes: 0, nothing holds the job up; 1, a first cause was named (a culprit, or a
collective no rank causes); 2, no job found, several found and none picked (``--pid``), no
rank's stack could be taken (py-spy missing or refused: said why), or a mistake in the command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from distmon.commands.shared import finding
from distmon.guards import values
from distmon.guards.text import visible
from distmon.node.finder import Found

if TYPE_CHECKING:
    from distmon.node.eye import NodeEye

SECONDS = 6.0
"""How long it looks by default: a rank's stack must stand still over three looks, two
seconds, and the one holding the others up be seen doing nothing, to be named."""
FIRST_SCAN = 10.0
"""Seconds to wait for the eye's first scan of this host."""
POLL = 0.05
CULPRIT = 1
NOTHING = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seconds",
        type=values.option(2, 3600),
        default=SECONDS,
        metavar="N",
        help=f"look this long before answering (default: {SECONDS:g})",
    )
    parser.add_argument("--json", action="store_true", help="print the alerts as distmon report --json does")
    parser.add_argument("--out", metavar="FILE", help="keep what was seen as a recording (distmon report, replay)")
    finding.add_finding_arguments(parser, always=True)


def run(args: argparse.Namespace) -> int:
    from distmon.node.eye import NodeEye

    blind = finding.blind(args)
    if blind is not None:
        print(f"distmon look: {blind}", file=sys.stderr)
        return NOTHING
    eye = NodeEye(find=True, pick=args.pid)
    assert eye.found is not None
    began = time.monotonic()
    while eye.found.scans == 0 and time.monotonic() - began < FIRST_SCAN:
        time.sleep(POLL)
    job, problem = _job(eye.found.found, args.pid, eye.found.parents)
    if job is None:
        eye.close()
        print(f"distmon look: {problem}", file=sys.stderr)
        return NOTHING
    with tempfile.TemporaryDirectory(prefix="distmon-look-") as folder:
        out = args.out or os.path.join(folder, "look.distmon")
        trouble = _look(eye, job, f"ipc://{folder}/look.sock", out, args.seconds)
        if trouble is not None:
            print(f"distmon look: {trouble}", file=sys.stderr)
            return NOTHING
        return _answer(out, args.json)


def _job(found: Found, pid: int | None, parents: Mapping[int, int]) -> tuple[str | None, str]:
    """The one job to look at (``pid``'s, where given), or why there is none."""
    jobs = found.jobs
    if pid is not None and (picked := found.job_of(pid, parents)) is not None:
        return picked, ""
    if len(jobs) == 1 and pid is None:
        return next(iter(jobs)), ""
    if jobs and pid is None:
        listed = "; ".join(
            f"{visible(job)}: {len(ranks)} ranks here (rank {ranks[0].rank}: pid {ranks[0].pid}, "
            f"started by pid {ranks[0].launcher})"
            for job, ranks in sorted(jobs.items())
        )
        return None, f"{len(jobs)} jobs run on this host, pick one with --pid (a rank's or its launcher's): {listed}"
    hidden = (
        f"; {found.hidden} Python processes of other users could not be read (run as root, or as their user)"
        if found.hidden
        else ""
    )
    which = f" with process {pid}" if pid is not None else ""
    return None, (
        f"no job{which} found on this host: no Python process with a launcher's rank in its environment (RANK, "
        f"SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK){hidden}"
    )


def _look(eye: NodeEye, job: str, endpoint: str, out: str, seconds: float) -> str | None:
    """Run the live monitor on what ``eye`` finds for ``seconds``, recording to ``out``."""
    from distmon.monitor.intake.feeds import LiveFeed
    from distmon.monitor.intake.receiver import EndpointError
    from distmon.monitor.pipeline import live_monitor
    from distmon.monitor.recording.writer import RecordingWriter
    from distmon.monitor.session import Session

    try:
        recorder = RecordingWriter(out)
    except OSError as e:
        eye.close()
        return f"cannot write {out}: {e.strerror}"
    try:
        feed = LiveFeed(endpoint, eye=eye)
    except EndpointError as e:
        recorder.close()
        eye.close()
        return str(e)
    session = Session(feed, live_monitor(recorder, job))
    until = time.monotonic() + seconds
    try:
        while time.monotonic() < until:
            session.drain()
            time.sleep(POLL)
        feed.settle()
        session.finish()
    finally:
        session.close()
    return None


def _answer(recording: str, as_json: bool) -> int:
    from distmon.export.plain import render
    from distmon.monitor.recording.readback import load_recording

    pm = load_recording(recording)
    if as_json:
        json.dump([a.to_json() for a in pm.alerts], sys.stdout, indent=2)
        print()
    else:
        print(render(pm))
    if pm.first_cause is not None:
        return CULPRIT
    blind, _ = pm.state.stackless(pm.last or 0.0)
    return NOTHING if len(blind) and len(blind) == len(pm.state.ranks) else 0
