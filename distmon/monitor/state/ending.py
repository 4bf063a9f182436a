"""How a job ended, or is ending, and its first cause, decided once: the report's "how it
ended", the terminal UI's state word and culprit, and the post-mortem read them from here; and
how each rank ended, in words (the words of each status are in
:mod:`distmon.monitor.state.statuses`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.monitor.state import statuses
from distmon.monitor.state.alerts import CRITICAL, Alert
from distmon.monitor.state.columns import ALL, I8
from distmon.monitor.state.consequences import LOST_PEER
from distmon.monitor.state.kinds import FAILURE_KINDS, HUNG_KINDS, STORY_KINDS, AlertKind
from distmon.monitor.state.words import duration, first_line, rank_word, time_of_day
from distmon.wire import Report

if TYPE_CHECKING:
    from distmon.monitor.state.ranks import RankState


@dataclass(frozen=True)
class Ending:
    """How a job ended, or is ending: ``state`` is one of the three below."""

    state: str
    words: str

    FAILED: ClassVar[str] = statuses.FAILED
    STOPPED: ClassVar[str] = statuses.STOPPED
    """Ended by signals (the launcher's teardown, Ctrl-C, distmon), not on its own."""
    FINISHED: ClassVar[str] = statuses.FINISHED


def gone(alerts: Iterable[Alert]) -> set[int]:
    """Ranks whose process the monitor saw gone (a ``rank_lost`` alert names them)."""
    return {r for a in alerts if a.kind == AlertKind.RANK_LOST for r in a.ranks}


class Named(Protocol):
    """An alert as far as :func:`first_cause` reads it: an :class:`Alert`, or a snapshot's facts."""

    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def ranks(self) -> Sequence[int]: ...


A = TypeVar("A", bound=Named)


def first_cause(alerts: Iterable[A]) -> A | None:
    """Of ``alerts`` (those that stand, in the order raised), the one whose ranks are the
    job's culprit: a critical alert before a warning, a failure before a stop (hang,
    divergence, stall), one that names ranks before one that names none, the earliest
    raised first. None where no alert of those kinds (:data:`STORY_KINDS`) stands: any
    other alert, however critical, tells no first cause. The header, the rank rows, the
    metrics, the report and ``distmon analyze`` all name this one, so they never name
    different ranks."""
    ranked = [(i, a) for i, a in enumerate(alerts) if a.kind in STORY_KINDS]
    found = min(
        ranked,
        key=lambda ia: (ia[1].severity != CRITICAL, ia[1].kind not in FAILURE_KINDS, not ia[1].ranks, ia[0]),
        default=None,
    )
    return found[1] if found is not None else None


class EndingFacts(Protocol):
    """What :func:`job_ending` reads of a job (:class:`~distmon.monitor.state.job.JobState`)."""

    def present(self) -> I8: ...
    def flagged(self, flag: int, ranks: I8 | slice = ALL) -> npt.NDArray[np.bool_]: ...
    def consequences(self, of: int, ranks: I8 | slice = ALL) -> npt.NDArray[np.bool_]: ...
    def failed_on_their_own(self) -> npt.NDArray[np.bool_]: ...
    def found(self, ranks: I8 | slice = ALL) -> npt.NDArray[np.bool_]: ...
    def report_of(self, rank: int) -> Report: ...


def job_ending(job: EndingFacts, standing: Iterable[Alert]) -> Ending | None:
    """How the job ended, given the alerts that stand (not resolved); None while it runs.

        A failure alert fails it (even while other ranks still run): the rules that raise them
        have already told the rank that failed first from those that raised because it went
        (:mod:`distmon.monitor.rules.failures`), so their verdict comes first. Before a rule has
        spoken (a recording that ends within a tick of the failure), a rank that raised on its
        own fails it; ranks that only raised on losing a peer are never named as its cause (a
    critical hang standing names the rank they gave up waiting for). Once
        every rank has exited, it was stopped (by a signal, while hung if a stop alert stood) or
        it finished."""
    standing = list(standing)
    failures = sorted((a for a in standing if a.kind in FAILURE_KINDS), key=lambda a: a.t)
    if failures:
        return Ending(Ending.FAILED, f"failed: {failures[0].headline}")
    raised = np.flatnonzero(job.failed_on_their_own()).tolist()
    lost_a_peer = job.consequences(LOST_PEER)
    culprits = [r for r in raised if not lost_a_peer[r]]
    if culprits:
        return Ending(Ending.FAILED, f"failed: {rank_word(culprits)} raised an exception")
    hung = [a for a in standing if a.kind in HUNG_KINDS and a.severity == CRITICAL]
    if raised and hung:  # they gave up waiting for the rank the hang names
        return Ending(Ending.FAILED, f"failed: {hung[0].headline}")
    if raised:
        return Ending(Ending.FAILED, f"failed: {rank_word(raised)} raised on losing a peer, which went without a word")
    present = job.present()
    if not len(present) or not job.flagged(wire.FLAG_EXITED)[present].all():
        return None
    stopped = np.flatnonzero(job.flagged(wire.FLAG_STOPPED_BY_SIGNAL)).tolist()
    if not stopped and job.found()[present].any():
        return Ending(
            Ending.FINISHED,
            "ended: every process of the job ended (found without the hook: whether cleanly, distmon cannot tell; "
            "the launcher's exit status and log can)",
        )
    if not stopped:
        return Ending(Ending.FINISHED, "finished: every rank exited cleanly")
    how = " and ".join(sorted({statuses.stop(e.how).job for r in stopped[:64] if (e := job.report_of(r).exit)}))
    who = f"{rank_word(stopped)} {how}"
    stops = sorted({a.kind for a in standing if a.kind in HUNG_KINDS and a.severity == CRITICAL})
    if stops:
        kinds = ", ".join(stops)
        words = f"stopped while hung: {who} while the {kinds} alert stood; it ended with the job, unresolved"
        return Ending(Ending.STOPPED, words)
    return Ending(Ending.STOPPED, f"stopped: {who}")


@dataclass(frozen=True)
class Fates:
    """What the monitor knew at the end of the ranks that said no last word: those its alerts
    named lost, alone (``rank_lost``) or with their node (``node_lost``); the hosts it said
    trained on unwatched (``node_unwatched``); the hosts whose relay was silent at the end; the
    processes the nodes' eyes saw end, and whose eye watches a host."""

    lost: set[int]
    with_node: set[int]
    unwatched: set[str]
    blind: set[str]
    gone: Mapping[tuple[str, int], float]
    eye_on: Callable[[str], str | None]


class FateFacts(Protocol):
    """What :func:`fates` reads of a job (:class:`~distmon.monitor.state.job.JobState`)."""

    @property
    def gone(self) -> Mapping[tuple[str, int], float]: ...
    def blind_hosts(self, now: float) -> set[str]: ...
    def eye_on(self, host: str) -> str | None: ...


def fates(job: FateFacts, alerts: Iterable[Alert], end: float) -> Fates:
    """:class:`Fates` at ``end``, given every alert raised (those resolved did not say how a rank
    ended)."""
    standing = [a for a in alerts if a.resolved is None]
    unwatched = {a.key.removeprefix(f"{a.kind}:") for a in standing if a.kind == AlertKind.NODE_UNWATCHED}
    with_node = {r for a in standing if a.kind == AlertKind.NODE_LOST for r in a.ranks}
    return Fates(gone(alerts), with_node, unwatched, job.blind_hosts(end), job.gone, job.eye_on)


def rank_ending(s: RankState, end: float, known: Fates) -> str:
    """How one rank ended, in words, for the table of ranks at the end: its last words, else
    what the monitor knew of it (``known``), else its silence. Never "running" for a process
    an eye saw end."""
    r = s.report
    if r.exception is not None:
        after = " (after losing a peer)" if s.lost_a_peer() else ""
        return f"raised {r.exception.type}: {first_line(r.exception.message)}{after}"
    if r.exit is not None:
        return statuses.stop(r.exit.how).rank
    if s.rank in known.lost:
        return "its process is gone, without last words (killed: see the rank_lost alert)"
    since = time_of_day(s.received)
    if s.rank in known.with_node:
        return f"lost with {r.host}, unheard since {since} (see the node_lost alert)"
    if r.host in known.blind:
        if r.host in known.unwatched:
            return (
                f"trained on unwatched since {since}: the relay on {r.host} fell silent (see the node_unwatched alert)"
            )
        return f"unheard since {since}: the relay on {r.host} fell silent"
    ended = known.gone.get((r.host, r.pid))
    if ended is not None:
        eye = known.eye_on(r.host) or "its eye"
        return f"its process is gone, without last words, as {eye} saw at {time_of_day(ended)}"
    return f"silent for {duration(s.silent_for(end))} at the end" if s.silent(end) else "running"
