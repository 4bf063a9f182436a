"""How a job ended, or is ending, and its first cause, decided once: the report's "how it
ended", the terminal UI's state word and culprit, and the post-mortem read them from here (how
each rank ended is said in :mod:`distmon.monitor.state.statuses`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeVar

from distmon.monitor.state import statuses
from distmon.monitor.state.alerts import CRITICAL, Alert

FAILURE_KINDS = frozenset({"rank_exception", "rank_lost", "worker_crash"})
STOP_KINDS = frozenset({"hang", "divergence", "stall"})
STORY_KINDS = FAILURE_KINDS | STOP_KINDS
"""The kinds of alert that tell how a job ends: a first cause is one of these."""


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
    return {r for a in alerts if a.kind == "rank_lost" for r in a.ranks}


class Named(Protocol):
    """An alert as far as :func:`cause` reads it: an :class:`Alert`, or a snapshot's facts."""

    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def ranks(self) -> Sequence[int]: ...


A = TypeVar("A", bound=Named)


def cause(alerts: Iterable[A]) -> A | None:
    """Of ``alerts`` (those that stand, in the order raised), the one whose ranks are the
    job's culprit: a critical alert before a warning, a failure before a stop (hang,
    divergence, stall), one that names ranks before one that names none, the earliest
    raised first. The header, the rank rows, the report's first cause and the metrics all
    name this one, so they never name different ranks."""
    ranked = [(i, a) for i, a in enumerate(alerts) if a.kind in STORY_KINDS]
    found = min(
        ranked,
        key=lambda ia: (ia[1].severity != CRITICAL, ia[1].kind not in FAILURE_KINDS, not ia[1].ranks, ia[0]),
        default=None,
    )
    return found[1] if found is not None else None
