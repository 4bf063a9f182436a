"""How a job ended, or is ending, decided once: the report's "how it ended", the terminal
UI's state word and the post-mortem read it from here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from distmon import wire
from distmon.monitor.alerts import CRITICAL, Alert
from distmon.monitor.words import rank_word
from distmon.wire import ENDED, INTERRUPTED, TERMINATED

if TYPE_CHECKING:
    from distmon.monitor.state import JobState

FAILURE_KINDS = frozenset({"rank_exception", "rank_lost", "worker_crash"})
STOP_KINDS = frozenset({"hang", "divergence", "stall"})
_HOW = {TERMINATED: "terminated by SIGTERM", INTERRUPTED: "interrupted (SIGINT)", ENDED: "ended by distmon"}


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
    """How the job ended, given the alerts that stand (not resolved): a rank that failed
    on its own, or a failure alert, fail it (even while other ranks still run); once every
    rank has exited, it was stopped (by a signal, while hung if a stop alert stood) or it
    finished. None while it runs."""
    standing = list(standing)
    raised = np.flatnonzero(job.failed_on_their_own()).tolist()
    if raised:
        return Ending(Ending.FAILED, f"failed: {rank_word(raised)} raised an exception")
    failures = sorted((a for a in standing if a.kind in FAILURE_KINDS), key=lambda a: a.t)
    if failures:
        return Ending(Ending.FAILED, f"failed: {failures[0].headline}")
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
