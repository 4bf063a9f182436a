"""What the rank table shows: each rank's status and its cells, column by column. The
status is the word the rank's flags give (what the table sorts and filters by), or, where
an alert names a culprit, the words :class:`distmon.monitor.overview.Story` gives: the
monitor's words (:mod:`distmon.monitor.state.statuses`), never the table's own.

Plain functions of a :class:`RankState` and the feed's clock, computed only for the rows
on screen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from distmon import wire
from distmon.monitor.overview import where_words
from distmon.monitor.state import RankState
from distmon.monitor.state.whereabouts import classify
from distmon.monitor.state.words import in_flight
from distmon.tui import cells

STATUS_WIDTH = 20
"""Wide enough for a culprit's words (``working - importing``) and ``waits for 2-3``."""


def collectives(rank: RankState, now: float) -> str:
    """Per process group: the collective in flight by its op and number, with its age
    (``all_reduce #66 28s``: the number the alerts name), else the last completed (``#65``);
    then each send or receive the rank is blocked in (``recv←2 #12 5.0s``). A stalled rank
    in none of them starts with where it stands in its own code (``at train.py:118 inject``)."""
    if rank.report.outside is not None:
        return found_place(rank)
    parts = []
    for g in rank.report.groups:
        if in_flight(g):
            age = f" {cells.short_duration(rank.age(g.since, now))}" if g.since else ""
            parts.append(f"{g.op or '…'} #{g.completed + 1}{age}")
        else:
            parts.append(f"#{g.completed}")
    blocked = False
    for c in rank.report.p2p:
        if c.blocked is not None and c.blocked_since is not None:
            blocked = True
            arrow = "→" if c.dir == wire.SEND else "←"
            peer = "*" if c.peer == wire.ANY_SOURCE else str(c.peer)
            parts.append(f"{c.dir}{arrow}{peer} #{c.blocked} {cells.short_duration(rank.age(c.blocked_since, now))}")
    waiting = blocked or any(in_flight(g) for g in rank.report.groups)
    where = where_words(rank) if not waiting else ""
    listed = " | ".join(parts) or "-"
    return f"at {where} · {listed}" if where else listed


def found_place(rank: RankState) -> str:
    """A rank found from outside counts no collectives: where its stack stands, and what kind
    of place that is (``at train.py:294 main · collective``)."""
    stack = rank.report.stack
    if not stack:
        return (
            f"no stack: {rank.report.outside.stack_error}"
            if rank.report.outside and rank.report.outside.stack_error
            else "-"
        )
    where = where_words(rank)
    kind = classify(stack).kind
    return f"at {where} · {kind}" if where else kind


def _steps(r: RankState, now: float, width: int) -> str:
    """Its steps; a rank found from outside counts none (its hook would)."""
    return "-" if r.report.outside is not None else str(r.report.steps)


def gpu_memory(rank: RankState, width: int) -> str:
    used, total = rank.gpu_used(), rank.gpu_total()
    if used is None or total is None:
        return "-"
    label = f" {used / 1024**3:.0f}/{total / 1024**3:.0f}G"
    return cells.bar(used / total, max(1, width - len(label))) + label


def workers(rank: RankState) -> str:
    loaders = rank.report.loaders
    if not loaders:
        return "-"
    alive = sum(w.alive for loader in loaders for w in loader.workers)
    return f"{alive}/{sum(loader.expected for loader in loaders)}"


@dataclass(frozen=True)
class Column:
    title: str
    width: int
    cell: Callable[[RankState, float, int], str]
    right: bool = False
    drop: int = 0
    """Columns with a higher ``drop`` are hidden first when the table is narrow; 0 never."""
    flex: bool = False
    """Takes the width left over."""


def _step_time(r: RankState, now: float, width: int) -> str:
    stats = r.report.step_time
    return cells.short_duration(stats.p50) if stats else "-"


def _holds(r: RankState, now: float, width: int) -> str:
    """The share of its peers' time it holds them up, where sure (``0%`` where not)."""
    pace = r.pace()
    return cells.percent(pace.holds if pace is not None else None)


def _gpu_util(r: RankState, now: float, width: int) -> str:
    gpu = r.report.gpu
    return "-" if gpu is None or gpu.util is None else f"{gpu.util:.0f}%"


def _rss(r: RankState, now: float, width: int) -> str:
    return cells.short_size(r.rss())


COLUMNS = (
    Column("status", STATUS_WIDTH, lambda r, now, w: r.status(now)),
    Column("rank", 5, lambda r, now, w: str(r.rank), right=True),
    Column("host", 9, lambda r, now, w: r.report.host, drop=1),
    Column("step", 7, _steps, right=True),
    Column("step t", 6, _step_time, right=True, drop=5),
    Column("holds", 5, _holds, right=True, drop=2),
    Column("seq · in flight", 18, lambda r, now, w: collectives(r, now), flex=True),
    Column("GPU memory", 13, lambda r, now, w: gpu_memory(r, w), drop=6),
    Column("util", 4, _gpu_util, right=True, drop=9),
    Column("RSS", 5, _rss, right=True, drop=7),
    Column("wrk", 4, lambda r, now, w: workers(r), right=True, drop=4),
    Column("wait", 4, lambda r, now, w: cells.percent(r.report.data_wait), right=True, drop=8),
)


def fitting(width: int, without: frozenset[str] = frozenset()) -> list[Column]:
    """The columns that fit in ``width`` cells, hiding the least useful first; the flexible
    one gets what is left."""
    columns = [c for c in COLUMNS if c.title not in without]
    while sum(c.width + 1 for c in columns) + 1 > width and any(c.drop for c in columns):
        columns.remove(max(columns, key=lambda c: c.drop))
    spare = width - 1 - sum(c.width + 1 for c in columns)
    return [replace(c, width=c.width + spare) if c.flex and spare > 0 else c for c in columns]
