"""How a job ended, or is ending, decided once: the report's "how it ended", the terminal
UI's state word and the post-mortem read it from here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from distmon import wire
from distmon.monitor.alerts import CRITICAL, Alert
from distmon.monitor.words import duration, rank_word
from distmon.wire import ENDED, INTERRUPTED, TERMINATED

if TYPE_CHECKING:
    from distmon.monitor.state import JobState
    from distmon.monitor.views import RankState

FAILURE_KINDS = frozenset({"rank_exception", "rank_lost", "worker_crash"})
STOP_KINDS = frozenset({"hang", "divergence", "stall"})
_HOW = {TERMINATED: "terminated by SIGTERM", INTERRUPTED: "interrupted (SIGINT)", ENDED: "ended by distmon"}
RANK_ENDINGS = {
    TERMINATED: "terminated by SIGTERM (the launcher's teardown)",
    INTERRUPTED: "interrupted (Ctrl-C)",
    ENDED: "ended by distmon (--abort-on-hang)",
}


@dataclass(frozen=True)
class Ending:
    """How a job ended, or is ending: ``state`` is one of the three below."""

    state: str
    words: str

    FAILED: ClassVar[str] = "failed"
    STOPPED: ClassVar[str] = "stopped"
    """Ended by signals (the launcher's teardown, Ctrl-C, distmon), not on its own."""
    FINISHED: ClassVar[str] = "finished"


def ending(job: JobState, standing: Iterable[Alert]) -> Ending | None:
    """How the job ended, given the alerts that stand (not resolved); None while it runs.

    A failure alert fails it (even while other ranks still run): the rules that raise them
    have already told the rank that failed first from those that raised because it went
    (:mod:`distmon.monitor.rules.failures`), so their verdict comes first. Before a rule has
    spoken (a recording that ends within a tick of the failure), a rank that raised on its
    own fails it; ranks that only raised on losing a peer are never named as its cause. Once
    every rank has exited, it was stopped (by a signal, while hung if a stop alert stood) or
    it finished."""
    standing = list(standing)
    failures = sorted((a for a in standing if a.kind in FAILURE_KINDS), key=lambda a: a.t)
    if failures:
        return Ending(Ending.FAILED, f"failed: {failures[0].headline}")
    raised = np.flatnonzero(job.failed_on_their_own()).tolist()
    culprits = [r for r in raised if not job.ranks[r].lost_a_peer()]
    if culprits:
        return Ending(Ending.FAILED, f"failed: {rank_word(culprits)} raised an exception")
    if raised:
        return Ending(Ending.FAILED, f"failed: {rank_word(raised)} raised on losing a peer, which went without a word")
    present = job.present()
    if not len(present) or not job.flagged(wire.EXITED)[present].all():
        return None
    stopped = np.flatnonzero(job.flagged(wire.STOPPED_BY_SIGNAL)).tolist()
    if not stopped:
        return Ending(Ending.FINISHED, "finished: every rank exited cleanly")
    how = " and ".join(sorted({_HOW.get(e.how, e.how) for r in stopped[:64] if (e := job.report_of(r).exit)}))
    who = f"{rank_word(stopped)} {how}"
    stops = sorted({a.kind for a in standing if a.kind in STOP_KINDS and a.severity == CRITICAL})
    if stops:
        kinds = ", ".join(stops)
        words = f"stopped while hung: {who} while the {kinds} alert stood; it ended with the job, unresolved"
        return Ending(Ending.STOPPED, words)
    return Ending(Ending.STOPPED, f"stopped: {who}")


def gone(alerts: Iterable[Alert]) -> set[int]:
    """Ranks whose process the monitor saw gone (a ``rank_lost`` alert names them)."""
    return {r for a in alerts if a.kind == "rank_lost" for r in a.ranks}


def rank_ending(s: RankState, end: float, lost: set[int]) -> str:
    """How one rank ended, in words, for the table of ranks at the end: its last words, else
    what the monitor saw (``lost``: from :func:`gone`), else its silence."""
    r = s.report
    if r.exception is not None:
        first_line = (r.exception.message.strip().splitlines() or [""])[0]
        after = " (after losing a peer)" if s.lost_a_peer() else ""
        return f"raised {r.exception.type}: {first_line[:80]}{after}"
    if r.exit is not None:
        return RANK_ENDINGS.get(r.exit.how, "exited cleanly")
    if s.rank in lost:
        return "its process is gone, without last words (killed: see the rank_lost alert)"
    return f"silent for {duration(s.silent_for(end))} at the end" if s.silent(end) else "running"
