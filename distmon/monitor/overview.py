"""The job at a glance: one state word, its pace, how long until PyTorch gives up, and the
one story every surface tells: the culprit (:func:`~distmon.monitor.state.ending.first_cause`, the
alert that names it), what it is doing and whom the other ranks wait for (:meth:`Story.status`).

Pure logic on the monitor's state, its alerts and the feed's clock, so the terminal UI's header
and rows and the tests read the same facts: it judges nothing itself (the words are the
monitor's, :mod:`distmon.monitor.state.statuses`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import PurePath

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.monitor.attach.messages import Progress
from distmon.monitor.pipeline import Monitoring
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import Alert
from distmon.monitor.state.array_sets import distinct
from distmon.monitor.state.ending import first_cause
from distmon.monitor.state.kinds import HUNG_KINDS
from distmon.monitor.state.statuses import WAITING, ended, failed_after, running_state, waits_for
from distmon.monitor.state.whereabouts import user_frame
from distmon.monitor.state.words import (
    blind_words,
    dropped_words,
    group_label,
    rank_word,
    stackless_words,
    timeout_left,
    unwatched_words,
)

RATE_WINDOW = 10.0
"""Seconds of progress that steps/s is measured over."""


@dataclass(frozen=True)
class OldestCollective:
    """The collective that has been in flight the longest, and when its timeout fires."""

    rank: int
    group: str
    op: str | None
    seq: int
    age: float
    remaining: float | None


@dataclass(frozen=True)
class Overview:
    job: str | None
    world: int
    ranks: int
    hosts: int
    state: str
    steps: int
    steps_per_second: float | None
    since_progress: float | None
    oldest: OldestCollective | None
    """Set while a collective has been in flight for longer than a stall: the oldest wait
    for the culprit, else the oldest of all."""
    culprits: frozenset[int]
    """The ranks the :func:`first_cause` names; empty when none does."""
    story: Story | None = None
    doing: str = ""
    """What the culprit does, in the words of the alert that names it (one culprit only)."""
    where: str = ""
    """Where it stands in its own code (:func:`where_words`; one culprit only)."""
    dropped: str = ""
    """What the monitor refused, by reason (``3 no_key, 1 rank_out_of_range``); empty if nothing."""
    unwatched: str = ""
    """The seconds the monitor did not watch, by why (``21s monitor_paused_s``); empty if none."""
    blind: str = ""
    """The hosts no eye watches (``node-b: no relay, judged from its reports only``); empty if none."""
    found: int = 0
    """Ranks found without the hook, judged from outside (no steps to count)."""


class OverviewTracker:
    """Follows the job's progress from tick to tick (steps/s, the last progress), so that
    the numbers depend on the feed's clock only, not on how often the screen is redrawn."""

    def __init__(self, memory: Progress | None = None) -> None:
        """``memory``: where another tracker left off (the monitor a screen attaches to)."""
        memory = memory or Progress()
        self._samples: deque[tuple[float, int]] = deque(memory.samples)
        self._marker: tuple[int, int] | None = memory.marker
        self._last_progress: float | None = memory.last

    def memory(self) -> Progress:
        """What this tracker has followed, for another to go on from."""
        return Progress(tuple(self._samples), self._marker, self._last_progress)

    def observe(self, monitor: Monitoring, now: float) -> None:
        """Call once per tick."""
        job = monitor.state
        present = job.present()
        if not len(present):
            return
        marker = job.progress()
        if marker != self._marker or job.moving_found(now):
            self._marker = marker
            self._last_progress = now
        self._samples.append((now, int(job.cols.steps[present].max())))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW:
            self._samples.popleft()

    def overview(self, monitor: Monitoring, now: float) -> Overview:
        job = monitor.state
        present = job.present()
        since = None if self._last_progress is None else max(0.0, now - self._last_progress)
        no_progress_after = monitor.limits.progress_after(job.pace())
        active = list(monitor.alerts.active.values())
        story = Story.of(monitor, now)
        oldest = _oldest_collective(job, now, story.waits if story.waits.any() else None)
        culprits = story.culprits
        culprit = job.ranks.get(min(culprits)) if len(culprits) == 1 else None
        return Overview(
            job=monitor.state.job,
            world=monitor.state.world,
            ranks=len(present),
            hosts=len(distinct(job.cols.host[present])),
            state=_state(monitor, active, since, no_progress_after, oldest),
            steps=int(job.cols.steps[present].max(initial=0)),
            steps_per_second=self._rate(),
            since_progress=since,
            oldest=oldest if oldest is not None and oldest.age >= no_progress_after else None,
            culprits=culprits,
            story=story,
            doing=(story.status(culprit) or "") if culprit is not None else "",
            where=where_words(culprit) if culprit is not None else "",
            dropped=dropped_words(monitor.state.dropped),
            unwatched=unwatched_words(monitor.state.unwatched),
            blind=blind_words(monitor.state.unwatched_hosts()) or stackless_words(*job.stackless(now)),
            found=int(np.count_nonzero(job.found())),
        )

    def _rate(self) -> float | None:
        if not self._samples:
            return None
        (t0, s0), (t1, s1) = self._samples[0], self._samples[-1]
        if t1 - t0 < 1.0:
            return None
        return max(0.0, (s1 - s0) / (t1 - t0))


def _oldest_collective(
    job: JobState, now: float, among: npt.NDArray[np.bool_] | None = None
) -> OldestCollective | None:
    """The collective in flight longest on a rank still running (of ``among``, a mask over
    ranks, if given), read off the columns; its group's words from that rank's report."""
    ages = np.where(job.flagged(wire.FLAG_EXITED), np.nan, job.collective_age(now))
    if among is not None:
        ages = np.where(among, ages, np.nan)
    if np.isnan(ages).all():
        return None
    rank = int(np.nanargmax(ages))
    age, gid = float(ages[rank]), int(job.cols.g_id[rank, job.cols.collective_slot[rank]])
    g = next((g for g in job.report_of(int(rank)).groups if wire.name_hash(g.id) == gid), None)
    if g is None:
        return None
    return OldestCollective(int(rank), group_label(g.id, g.desc), g.op, g.completed + 1, age, timeout_left(g, age))


def _state(
    monitor: Monitoring,
    active: list[Alert],
    since: float | None,
    no_progress_after: float,
    oldest: OldestCollective | None,
) -> str:
    """The job's one state word, as the monitor decides it: how it ended
    (:meth:`JobState.ending`) or, while it runs, whether it progresses (:func:`running_state`)."""
    if not monitor.state.ranks:
        return WAITING
    ending = monitor.state.ending(active)
    if ending is not None:
        return ending.state
    stopping = bool({a.kind for a in active} & HUNG_KINDS)
    return running_state(stopping, since, no_progress_after, oldest.age if oldest is not None else None, monitor.limits)


@dataclass(frozen=True)
class Story:
    """The culprit of the job now, from the alert that names it (:func:`first_cause`), and the
    ranks that wait for it: what the header, the rank rows and the metrics say."""

    cause: Alert | None
    culprits: frozenset[int]
    waits: npt.NDArray[np.bool_]
    """Per rank: still running and waiting in a collective or a send or receive while the
    culprits hold up the job (or the ranks :attr:`pausing` do, as usual). The hang rule
    found that every such wait leads to them, directly or through a peer."""
    pausing: dict[int, str] = field(default_factory=dict)
    """Ranks in a pause the job takes as a habit, with what it is
    (:attr:`distmon.monitor.rules.routine.Routine.pausing`): no alert, their status."""

    @classmethod
    def of(cls, monitor: Monitoring, now: float) -> Story:
        job = monitor.state
        found = first_cause(monitor.alerts.active.values())
        culprits = frozenset(found.ranks) if found is not None else frozenset[int]()
        pausing = {} if found is not None else dict(monitor.pausing)
        waits = np.zeros(len(job.cols.present), dtype=bool)
        if found is not None or pausing:
            waits = job.waiting_on_peers(now)
            waits[sorted(culprits | pausing.keys())] = False
        return cls(found, culprits, waits, pausing)

    @property
    def waiting(self) -> int:
        return int(np.count_nonzero(self.waits))

    def status(self, s: RankState) -> str | None:
        """Rank ``s``'s status in words a person reads at a glance, as the monitor decided it: a
        culprit says what it is doing, as the rule that names it wrote (``asleep``, ``stopped
        (SIGSTOP)``, ``working - checkpointing``), or how it ended since; a rank in a usual pause
        that it pauses (``pausing as usual: upload_metrics, about 3s every 25 steps``); a rank that
        waits for one for whom (``waits for 2``); one that raised on losing a peer after whom
        (``failed after 3``). None for the others, whose status is the word their flags give
        (:meth:`~distmon.monitor.state.job.JobState.statuses`)."""
        if s.rank in self.culprits:
            if s.finished:  # an alert standing as the job ended keeps the words of before
                return ended(s.report)
            return self.cause.doing.get(s.rank) if self.cause is not None else None
        if s.rank in self.pausing:
            return self.pausing[s.rank]
        if s.rank < len(self.waits) and self.waits[s.rank]:
            if self.pausing:
                return waits_for(sorted(self.pausing), usual=True)
            return waits_for(sorted(self.culprits))
        if self.culprits and s.finished and s.lost_a_peer():
            return failed_after(sorted(self.culprits))
        return None


def where_words(s: RankState) -> str:
    """Where a stalled rank stands in its own code, short: ``train.py:118 inject``."""
    frame = user_frame(s.report.stack or [])
    return f"{PurePath(frame.file).name}:{frame.line} {frame.func}" if frame is not None else ""


def culprit_words(o: Overview) -> str:
    """The culprit named in one phrase: ``rank 2 asleep``, ``ranks 2-3``, or that none is."""
    if o.story is None or o.story.cause is None:
        return "no rank named yet"
    if not o.culprits:
        return "no rank behind: the collective itself does not complete"
    where = f" at {o.where}" if o.where else ""
    return f"{rank_word(o.culprits)} {o.doing}{where}".rstrip()
