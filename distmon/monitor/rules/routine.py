"""The job's routine pauses, learned from what it does, as its pace is.

A healthy job pauses on one rank while the others wait, again and again: it logs to a slow
service every N steps, evaluates alone, saves a checkpoint, collects garbage. Each such pause
looks, for its first seconds, like the start of a hang. A pause the job has taken and come
out of before is its rhythm: the same ranks, in the same place (their own code, or what their
process sits in). While one lasts no longer than it usually does (:data:`MARGIN` times the
longest seen, never less than the hang threshold), the hang rule names nobody for it and the
rank's status says it pauses as usual; one that outlasts that is a hang, named as one, saying
how long that pause usually takes. What is new (a rank stopped, blocked on a file, holding
the GIL, asleep where it never slept) fits no habit and is named as fast as ever.

Nothing is configured. A pause counts once it ended on its own (its ranks went on), unless a
person or a debugger stopped the rank, or it was named for outlasting its habit (an
exception, not the rule); it is a habit once the job has taken it :data:`USUAL_AFTER` times,
so its first time may warn. It counts only if it was one: the waiting ranks' own reports
showed a wait longer than a few of the job's steps
(:data:`~distmon.monitor.state.limits.PAUSE_STEPS`). A rank the others wait for in every
step holds them up for a fraction of a step each time; the monitor, reading reports sent
once a second, sees their waits age between two reports as if the job stood still, but
that is the job's pace, and the rank a straggler (:mod:`~distmon.monitor.rules.pace`),
never a habit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from distmon.monitor.state.kinds import NEVER_USUAL
from distmon.monitor.state.words import duration

USUAL_AFTER = 1
"""Pauses of the same kind the job has come out of before the next one is usual: one, so a
habit warns its first time alone (a healthy job's every habit paged once is one too many)."""
MARGIN = 2.0
"""A usual pause may last this many times the longest one seen before it is a hang."""
MAX_HABITS = 64
"""Habits kept; past that, the least taken is forgotten (memory stays bounded)."""
MAX_STEPS = 16
"""Steps kept per habit at which it began: enough to tell its period."""


@dataclass(frozen=True)
class Mark:
    """Where one rank of a pause is, as far as the monitor can tell now: its own code (the
    user's frame, ``train.py:upload_metrics``) and what its process does (a verdict's
    :attr:`~distmon.monitor.outside.verdicts.Verdict.habit`, ``sleeping:poll``); either may be
    unknown (no stack reported yet, no prober)."""

    frame: str | None = None
    doing: str | None = None
    words: str = ""
    """What it does in words (``asleep in poll``), for the status."""


@dataclass
class _Places:
    """The frames and doings each rank of a pause was seen in."""

    frames: dict[int, set[str]] = field(default_factory=dict)
    doings: dict[int, set[str]] = field(default_factory=dict)
    said: str = ""
    """What the first rank was first seen doing, in words."""

    @property
    def words(self) -> str:
        """Where the pause is, in a few words: the function it is in, else what it does."""
        first = min(self.frames, default=None)
        return min(self.frames[first]).rsplit(":", 1)[-1] if first is not None else self.said

    def add(self, marks: dict[int, Mark]) -> None:
        for rank, mark in marks.items():
            if mark.frame is not None:
                self.frames.setdefault(rank, set()).add(mark.frame)
            if mark.doing is not None:
                self.doings.setdefault(rank, set()).add(mark.doing)
            self.said = self.said or mark.words

    def fit(self, marks: dict[int, Mark]) -> bool:
        """Every mark known is one seen before (an unknown one fits), and none is what no job
        does as a habit (a rank stopped, or gone)."""
        return all(
            (m.frame is None or rank not in self.frames or m.frame in self.frames[rank])
            and (m.doing is None or rank not in self.doings or m.doing in self.doings[rank])
            and not _never_usual(m.doing)
            for rank, m in marks.items()
        )

    def knows(self, ranks: tuple[int, ...]) -> bool:
        """Where each of ``ranks`` was is known, by its frame or by what its process did."""
        return all(rank in self.frames or rank in self.doings for rank in ranks)

    def overlap(self, other: _Places) -> bool:
        """The same place: a frame in common where both know the frames, else a doing."""
        for mine, theirs in ((self.frames, other.frames), (self.doings, other.doings)):
            if mine and theirs:
                return all(mine.get(rank, set()) & theirs.get(rank, set()) for rank in mine.keys() | theirs.keys())
        return True

    def merge(self, other: _Places) -> None:
        for mine, theirs in ((self.frames, other.frames), (self.doings, other.doings)):
            for rank, seen in theirs.items():
                mine.setdefault(rank, set()).update(seen)
        self.said = self.said or other.said


@dataclass
class Habit:
    """A pause the job takes again and again: its ranks, where they are, how long it lasts
    at the longest, and the steps at which it began."""

    ranks: tuple[int, ...]
    places: _Places
    longest: float
    steps: list[int]
    taken: int = 1

    @property
    def usual(self) -> bool:
        return self.taken >= USUAL_AFTER

    def allowance(self, hang_after: float) -> float:
        """How long one of these may last before it is a hang."""
        return max(MARGIN * self.longest, hang_after)

    def words(self) -> str:
        """``upload_metrics, about 3s every 25 steps``."""
        return f"{self.places.words or 'paused'}, about {about(self.longest)}{self._period()}"

    def _period(self) -> str:
        gaps = Counter(b - a for a, b in zip(self.steps, self.steps[1:], strict=False) if b > a)
        if not gaps:
            return ""
        gap, n = gaps.most_common(1)[0]
        return f" every {gap} steps" if 2 * n >= sum(gaps.values()) else ""


@dataclass
class _Pause:
    """A pause going on: ranks holding the others up, seen at each tick."""

    ranks: tuple[int, ...]
    step: int
    """The least step of its ranks when it began: a rank past it has come out of it."""
    longest: float
    places: _Places
    outlasted: bool = False
    """It was named for lasting longer than its habit: an exception, not learned."""
    paused: bool = False
    """The waiting ranks' own reports showed the job standing still for it: a pause, not the
    job's pace."""


class Routine:
    """The detector's memory of the job's pauses, from tick to tick."""

    def __init__(self) -> None:
        self.habits: list[Habit] = []
        self.pausing: dict[int, str] = {}
        """Ranks in a usual pause now, with what it is (:meth:`Habit.words`): their status."""
        self._pauses: dict[tuple[int, ...], _Pause] = {}
        self._seen: set[tuple[int, ...]] = set()
        self._pausing: dict[int, str] = {}

    def observe(
        self, ranks: list[int], waited: float, marks: dict[int, Mark], steps: dict[int, int], paused: bool
    ) -> Habit | None:
        """One tick of a pause: ``ranks`` have held the others up for ``waited`` seconds, each
        where its ``marks`` say, at the ``steps`` they report; ``paused``, whether the waiting
        ranks' own reports show them waiting longer than a few steps. Returns the habit it
        is, if the job has taken it often enough and it fits: the caller names nobody while it
        lasts no longer than :meth:`Habit.allowance`."""
        key = tuple(ranks)
        self._seen.add(key)
        pause = self._pauses.get(key)
        if pause is None:
            pause = self._pauses[key] = _Pause(key, min(steps.values(), default=0), waited, _Places())
        pause.longest = max(pause.longest, waited)
        pause.paused |= paused
        if not pause.places.knows(key):
            # seen first from reports sent before its ranks reached it: its step is where they are now
            pause.step = max(pause.step, min(steps.values(), default=0))
        if all(step <= pause.step for step in steps.values()):
            pause.places.add(marks)  # past its step, a rank is out of it: the waits shown are old
        habit = self._habit(key, marks)
        if habit is not None and habit.usual:
            for rank in ranks:
                self._pausing[rank] = f"pausing as usual: {habit.words()}"
            return habit
        return None

    def outlasted(self, ranks: list[int]) -> None:
        """The pause of ``ranks`` is named for outlasting its habit: it will not be learned."""
        pause = self._pauses.get(tuple(ranks))
        if pause is not None:
            pause.outlasted = True

    def settle(self, went_on: Callable[[int], bool], learning: bool) -> None:
        """End the tick: a pause not seen in it is over. It is learned if it was one (the job
        stood still for it), it ended on its own (every rank of it ``went_on``: still running,
        not silent), where each of its ranks was is known (a habit that knows no place would
        fit any pause), and it was neither named for outlasting its habit nor something no job
        does as a habit (:data:`NEVER_USUAL`). While
        the monitor is not ``learning`` (it is behind, and may not see the waits), no pause ends."""
        for key in [k for k in self._pauses if k not in self._seen and learning]:
            pause = self._pauses.pop(key)
            never = any(_never_usual(d) for seen in pause.places.doings.values() for d in seen)
            known = pause.places.knows(key)
            if pause.paused and known and not pause.outlasted and not never and all(went_on(rank) for rank in key):
                self._learn(pause)
        self.pausing, self._pausing, self._seen = self._pausing, {}, set()

    def _habit(self, key: tuple[int, ...], marks: dict[int, Mark]) -> Habit | None:
        return next((h for h in self.habits if h.ranks == key and h.places.fit(marks)), None)

    def _learn(self, pause: _Pause) -> None:
        habit = next((h for h in self.habits if h.ranks == pause.ranks and h.places.overlap(pause.places)), None)
        if habit is None:
            self.habits.append(Habit(pause.ranks, pause.places, pause.longest, [pause.step]))
            if len(self.habits) > MAX_HABITS:
                self.habits.remove(min(self.habits, key=lambda h: h.taken))
            return
        habit.taken += 1
        habit.longest = max(habit.longest, pause.longest)
        habit.places.merge(pause.places)
        habit.steps = [*habit.steps, pause.step][-MAX_STEPS:]


def _never_usual(doing: str | None) -> bool:
    """``doing`` (a verdict's habit, ``stopped``) is something no job does as a habit."""
    return doing is not None and doing.split(":")[0] in NEVER_USUAL


def about(seconds: float) -> str:
    """``3s``, ``45s``, ``1m30s``: a length given roughly."""
    return f"{round(seconds)}s" if 1.5 <= seconds < 60 else duration(seconds)
