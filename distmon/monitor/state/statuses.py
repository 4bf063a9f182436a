"""Statuses and their words, each defined once: a rank's (the word its flags give, what the
rank table sorts and filters by), how it ended, what a rank an alert names is doing (the words
the rule that names it writes into its finding: :attr:`distmon.monitor.state.alerts.Finding.doing`),
and the job's one state word.

The terminal UI gives these words their styles; it decides none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from distmon import wire
from distmon.monitor.state.kinds import Doing
from distmon.monitor.state.limits import Thresholds
from distmon.monitor.state.words import ranks_text
from distmon.wire import ENDED, INTERRUPTED, TERMINATED, Report

OK = "ok"
STALLED = "stalled"
SILENT = "silent"
FAILED = "failed"
"""Raised, and not only because the job was being stopped around it
(:meth:`distmon.monitor.state.job.JobState.failed_on_their_own`)."""
WORKER = "worker"
"""A DataLoader worker of its died."""
EXITED = "exited"
STOPPED = "stopped"
"""Ended by a signal (the launcher's SIGTERM, Ctrl-C) or by distmon, not on its own. A job whose
ranks all ended so is stopped too (:class:`distmon.monitor.state.ending.Ending`)."""

MAX_SAID = 64
"""Ranks a finding says what they do (:attr:`~distmon.monitor.state.alerts.Finding.doing`), at
most: the rows of any more show the word their flags give."""

STATUSES = (EXITED, OK, STOPPED, WORKER, STALLED, SILENT, FAILED)
"""A rank's, by severity: the worst last, first when sorting by status."""
SEVERITY = {word: i for i, word in enumerate(STATUSES)}

WAITING = "waiting"
HEALTHY = "healthy"
HUNG = "hung"
FINISHED = "finished"
JOB_STATES = (WAITING, HEALTHY, STALLED, HUNG, FAILED, STOPPED, FINISHED)
"""The job's one state word (:func:`distmon.monitor.overview.OverviewTracker.overview`): waiting
for a first report, then whether it progresses, then how it ended
(:class:`~distmon.monitor.state.ending.Ending`)."""


def running_state(
    stopping: bool,
    without_progress: float | None,
    no_progress_after: float,
    oldest_wait: float | None,
    limits: Thresholds,
) -> str:
    """The state word of a job that runs: hung while an alert that stops a job stands
    (``stopping``: a hang, a divergence, a stall), or once it has gone ``no_progress_after``
    seconds without progress and its oldest collective in flight has waited
    :attr:`~distmon.monitor.state.limits.Thresholds.hung_after`, whatever the rules have said
    yet; stalled when only the first holds; else healthy."""
    if stopping:
        return HUNG
    if without_progress is None or without_progress < no_progress_after:
        return HEALTHY
    return HUNG if oldest_wait is not None and oldest_wait >= limits.hung_after else STALLED


@dataclass(frozen=True)
class Stop:
    """How a rank was stopped from outside, in the words of each place that says it."""

    status: str
    """Its status, where an alert names it: ``terminated``."""
    job: str
    """In how the job ended: ``ranks 0-3 terminated by SIGTERM``."""
    rank: str
    """In the table of how each rank ended: ``terminated by SIGTERM (the launcher's teardown)``."""


STOPS = {
    TERMINATED: Stop("terminated", "terminated by SIGTERM", "terminated by SIGTERM (the launcher's teardown)"),
    INTERRUPTED: Stop("interrupted", "interrupted (SIGINT)", "interrupted (Ctrl-C)"),
    ENDED: Stop("ended by distmon", "ended by distmon", "ended by distmon (--abort-on-hang)"),
}
"""By :attr:`distmon.wire.ExitInfo.how`: every way a rank is stopped (:data:`distmon.wire.STOPPED_HOWS`)."""
CLEAN = Stop(EXITED, "exited", "exited cleanly")
"""A rank that ended on its own."""
DONE = Stop(EXITED, "finished", "finished training (its training function returned or it left the process group)")
"""A rank that said goodbye before its process went (:data:`distmon.wire.FINISHED`: Ray Train's
workers, which Ray ends after their training function returns)."""


GONE = Stop("gone", "ended, seen from outside", "its process ended (found without the hook: how, distmon cannot tell)")
"""A rank found from outside whose process ended (:data:`distmon.wire.GONE`)."""


def stop(how: str) -> Stop:
    """How a rank whose process ended ``how`` ended, in words."""
    if how == wire.GONE:
        return GONE
    return DONE if how == wire.FINISHED else STOPS.get(how, CLEAN)


def ended(report: Report) -> str:
    """How a rank that raised or exited ended, as its status: ``raised RuntimeError``,
    ``terminated``, ``exited``."""
    if report.exception is not None:
        return f"raised {report.exception.type}"
    return stop(report.exit.how).status if report.exit is not None else EXITED


DOING_WORDS = {
    Doing.SIGSTOPPED: "stopped (SIGSTOP)",
    Doing.TRACED: "in a debugger",
    Doing.ZOMBIE: "exited",
    Doing.GONE: "gone",
    Doing.FILE_IO: "blocked in I/O",
    Doing.NETWORK: "on the network",
    Doing.GIL: "holding the GIL",
    Doing.LOCK: "waits on a lock",
    Doing.SLEEPING: "asleep",
    Doing.DATALOADER: "in a DataLoader wait",
    Doing.INIT: "in rendezvous",
    Doing.P2P: "in a send/recv",
    Doing.COLLECTIVE: "in a collective",
    Doing.CUDA: "in a CUDA sync",
    Doing.USER: "in its own code",
}
"""What a named rank is doing, in a few words: as its process was seen
(:attr:`distmon.monitor.outside.verdicts.Verdict.kind`), or, where nothing was seen of it (a
replay of an old recording, a node without an eye), where its stack stands
(:mod:`distmon.monitor.state.whereabouts`)."""
WORK_WORDS = {
    "loading a checkpoint": "loading",
    "writing a checkpoint": "checkpointing",
    "importing modules": "importing",
    "building a C++/CUDA extension": "building",
    "compiling (torch.compile)": "compiling",
    "running evaluation": "evaluating",
}
"""The work a working process does, by what its stack shows (:func:`distmon.monitor.outside.verdicts.activity`)."""


def process_doing(kind: Doing, work: str = "") -> str:
    """A named rank's status by what its process was seen doing (``kind``; ``work``: what a
    working one works at): ``asleep``, ``working - checkpointing``."""
    if kind == Doing.WORKING:
        return f"working - {WORK_WORDS[work]}" if work in WORK_WORDS else "working"
    return DOING_WORDS.get(kind, "no progress")


def place_doing(place: Doing | None, silent: bool) -> str:
    """A named rank's status by where its stack stands (``place``, None without a stack)."""
    if place is not None:
        return DOING_WORDS.get(place, STALLED)
    return SILENT if silent else STALLED


def waits_for(culprits: list[int], usual: bool = False) -> str:
    """A rank that waits for ``culprits`` (``usual``: in a pause the job takes as a habit)."""
    if not culprits:
        return "waits, none behind"
    return f"waits for {ranks_text(culprits)}" + (", as usual" if usual else "")


def failed_after(culprits: list[int]) -> str:
    """A rank that raised on losing a peer, after ``culprits`` failed."""
    return f"failed after {ranks_text(culprits)}"
