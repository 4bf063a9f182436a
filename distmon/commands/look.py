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
rank's stack could be taken (py-spy missing or refused: said why), ranks a node reached found
never reported before the look ended (said which), or a mistake in the command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from distmon import keys
from distmon.commands.shared import finding
from distmon.guards import values
from distmon.guards.text import visible
from distmon.monitor.state.alerts import CRITICAL
from distmon.monitor.state.words import count, rank_word, reach_line
from distmon.node.finder import Found, FoundRank
from distmon.node.jobhosts import is_here
from distmon.node.launchers import slurm_job
from distmon.node.proc import interpreter_of
from distmon.reach.plan import Plan, ReachError, from_job, from_launcher, given, reach

if TYPE_CHECKING:
    from distmon.monitor.state import JobState
    from distmon.monitor.state.alerts import AlertBook
    from distmon.node.eye import NodeEye
    from distmon.reach.eyes import Eyes

SECONDS = 6.0
"""How long it looks by default: a rank's stack must stand still over three looks, two
seconds, and the one holding the others up be seen doing nothing, to be named."""
LONGEST = 2.0
"""It looks ``--seconds`` from the moment every rank of the job has reported, at most this many
times ``--seconds`` in all (on a loaded host, or nodes slow to answer, the first stacks come
late: a look that has not yet heard every rank goes on until it has or this is up), and answers
as soon as an alert is critical."""
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
        help=f"look this long at the ranks once each has reported, less if a culprit is named first (default: "
        f"{SECONDS:g}; at most twice that in all)",
    )
    parser.add_argument("--json", action="store_true", help="print the alerts as distmon report --json does")
    parser.add_argument("--out", metavar="FILE", help="keep what was seen as a recording (distmon report, replay)")
    parser.add_argument("--job", metavar="JOB", help="the job of this id, where several run on the nodes looked at")
    finding.add_finding_arguments(parser, always=True)


def run(args: argparse.Namespace) -> int:
    from distmon.node.eye import NodeEye

    problem = finding.problem(args)
    try:
        plan = given(args.slurm, args.hosts, args.hostfile)
    except ReachError as e:
        problem = problem or str(e)
    if problem:
        print(f"distmon look: {problem}", file=sys.stderr)
        return NOTHING
    named_nodes = plan is not None and args.pid is None
    eye = NodeEye(find=True, pick=args.pid, job=args.job)
    assert eye.found is not None
    began = time.monotonic()
    while eye.found.scans == 0 and time.monotonic() - began < FIRST_SCAN:
        time.sleep(POLL)
    job, trouble = _job(eye.found.found, args.pid, args.job, eye.found.parents)
    if job is not None and args.pid is None and args.job is None and not args.here and plan is None:
        job, trouble = _not_also_launched(eye.found.found, job, eye.found.parents)
    here = eye.found.found.jobs.get(job, []) if job is not None else []
    if plan is None and job is not None and not args.here and max((r.world for r in here), default=0) > len(here):
        plan = from_job(job, eye.found.hosts_of(job)) or None
    if plan is None and job is None and not args.here:
        plan = from_launcher(eye.found.found.launchers, args.pid)
    blind = finding.blind(args) if here else None
    if (job is None and not plan) or blind is not None:
        eye.close()
        print(f"distmon look: {blind or trouble}", file=sys.stderr)
        return NOTHING
    with tempfile.TemporaryDirectory(prefix="distmon-look-") as folder:
        out = args.out or os.path.join(folder, "look.distmon")
        endpoint = f"ipc://{folder}/look.sock"
        failed = _look(eye, job, args.job, plan, named_nodes, _pythons(here), endpoint, out, args.seconds)
        if failed is not None:
            print(f"distmon look: {failed}", file=sys.stderr)
            return NOTHING
        return _answer(out, args.json)


def _job(found: Found, pid: int | None, named: str | None, parents: Mapping[int, int]) -> tuple[str | None, str]:
    """The one job to look at on this host (``pid``'s, or the job ``named``, where given), or
    why there is none."""
    jobs = found.jobs
    if named is not None:
        return (named, "") if named in jobs else (None, f"no job {visible(named)} found on this host")
    if pid is not None and (picked := found.job_of(pid, parents)) is not None:
        return picked, ""
    if len(jobs) == 1 and pid is None:
        return next(iter(jobs)), ""
    if jobs and pid is None:
        listed = "; ".join(
            f"{visible(job)}: {count(len(ranks), 'rank')} here (pid {ranks[0].pid}, started by pid {ranks[0].launcher})"
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
        f"no job{which} found on this host: no Python process a launcher made a rank (torchrun, srun, mpirun, "
        f"mp.spawn, Lightning){hidden}; on a login node, name the job's nodes: --slurm [JOBID], --hosts, --hostfile"
    )


def _not_also_launched(found: Found, job: str, parents: Mapping[int, int]) -> tuple[str | None, str]:
    """``job``, unless an ``mpirun`` here also runs ranks only on other hosts: two jobs, and the
    user picks (following the one here would leave the other unseen without a word)."""
    away = [
        pid
        for pid, hosts in found.launchers.items()
        if found.job_of(pid, parents) is None and any(not is_here(h) for h in hosts)
    ]
    if not away:
        return job, ""
    ranks = found.jobs[job]
    return None, (
        f"{1 + len(away)} jobs start here, pick one with --pid (a rank's or its launcher's): {visible(job)}: "
        f"{count(len(ranks), 'rank')} here (pid {ranks[0].pid}, started by pid {ranks[0].launcher}); "
        f"mpirun pid {away[0]}, its ranks on {', '.join(visible(h) for h in found.launchers[away[0]][:4])}"
    )


def _pythons(here: list[FoundRank]) -> list[str]:
    """The Pythons to run the eye with on other nodes: the job's own (where its ranks are here),
    this one, then whatever ``python3`` is there."""
    theirs = [exe for r in here[:1] if (exe := interpreter_of(r.pid))]
    return [*theirs, sys.executable, "python3"]


def _look(
    eye: NodeEye,
    job: str | None,
    named: str | None,
    plan: Plan | None,
    explicit: bool,
    pythons: list[str],
    endpoint: str,
    out: str,
    seconds: float,
) -> str | None:
    """Run the live monitor on what ``eye`` finds, and the eyes ``plan`` reaches, for
    ``seconds``, recording to ``out``: on ``job``, else the one ``named``, else where the nodes
    were named (``explicit``), the job found on most of them."""
    from distmon.monitor.intake.feeds import LiveFeed
    from distmon.monitor.intake.receiver import EndpointError
    from distmon.monitor.pipeline import live_monitor
    from distmon.monitor.recording.writer import RecordingWriter
    from distmon.monitor.session import Session
    from distmon.reach.eyes import Eyes

    try:
        recorder = RecordingWriter(out)
    except OSError as e:
        eye.close()
        return f"cannot write {out}: {e.strerror}"
    key = keys.fresh() if plan else None
    try:
        feed = LiveFeed(endpoint, eye=eye, eyes=key)
    except EndpointError as e:
        recorder.close()
        eye.close()
        return str(e)
    eyes = None
    if plan and key is not None and feed.eyes_port is not None:
        eyes = Eyes(feed.eyes_port, key, named if explicit else job, pythons)
        eye.reaching = eyes
        reach(eyes, plan)
        asked = slurm_job(plan.slurm[0]) if plan.slurm is not None else None
        job = named or (job if not explicit else _job_of(eyes, job, asked))
    session = Session(feed, live_monitor(recorder, job))
    began = time.monotonic()
    until, seen = began + LONGEST * seconds, False
    try:
        while time.monotonic() < until and not _named(session.monitor.alerts):
            session.drain()
            if not seen and (seen := _every_rank_seen(session.monitor.state)):
                until = min(time.monotonic() + seconds, until)
            time.sleep(POLL)
        feed.settle()
        session.finish()
    finally:
        session.close()
        if eyes is not None:
            eyes.close()
    return None


def _named(alerts: AlertBook) -> bool:
    """A critical alert stands: the look has its answer (a warning may yet turn critical)."""
    return any(alert.severity == CRITICAL for alert in alerts.active.values())


def _every_rank_seen(state: JobState) -> bool:
    """Every rank of the job has reported (found on a node, its first stack taken)."""
    return bool(state.world) and len(state.ranks) >= state.world


def _unheard(state: JobState) -> dict[int, str]:
    """The ranks the nodes reached said they found that never reported, each with its node: a
    look that ends without them has not seen the job, whatever the others show."""
    import numpy as np

    found = state.told.found()
    ranks = sorted(found)
    heard = state.heard(np.array(ranks, dtype=np.int64))
    return {rank: found[rank] for rank, was in zip(ranks, heard, strict=True) if not was}


def _job_of(eyes: Eyes, here: str | None, asked: str | None = None) -> str | None:
    """The job to follow among those the nodes reached found: the Slurm job ``asked`` for
    (``--slurm``), as its ranks name it, wherever it was found or where nothing was yet (an eye
    may answer before its first look at its node's processes ends); else the one found on the
    most nodes (this host's, ``here``, where as many: it counts where the nodes found it too; a
    job of this host's alone is another's, followed only where the nodes found none); the
    others said."""
    nodes: Counter[str] = Counter(job for node in eyes.nodes.values() for job in node.jobs)
    if here is not None and here in nodes:
        nodes[here] += 1
    if asked is not None and (asked == here or asked in nodes or not nodes):
        job = asked
    elif not nodes:
        return here
    else:
        most = max(nodes.values())
        job = here if here is not None and nodes[here] == most else min(j for j, n in nodes.items() if n == most)
    if len(nodes) > 1:
        others = ", ".join(visible(j) for j in sorted(nodes) if j != job)
        print(
            f"distmon look: looking at job {visible(job)}; also found: {others} (pick one with --job)", file=sys.stderr
        )
    return job


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
    unheard = _unheard(pm.state)
    if unheard:
        ranks, hosts = sorted(unheard), sorted(set(unheard.values()))
        print(
            f"distmon look: {rank_word(ranks)}, found on {', '.join(visible(h) for h in hosts[:4])}, sent no report "
            "before the look ended (their node's eye sent none in time): nothing is said of them, nor of "
            "what the others wait for; look again with a longer --seconds",
            file=sys.stderr,
        )
        return NOTHING
    if not pm.state.ranks:
        missed = [line for r in pm.state.told.reached.values() if (line := reach_line(r))]
        print(
            f"distmon look: no rank of the job was seen{': ' if missed else ''}{'; '.join(visible(m) for m in missed)}",
            file=sys.stderr,
        )
        return NOTHING
    blind, _ = pm.state.stackless(pm.last or 0.0)
    return NOTHING if len(blind) and len(blind) == len(pm.state.ranks) else 0
